"""gputriage's figures in the job's own W&B run.

Under ``gputriage record`` the recorder writes what it measures about the job to
a feed the job inherits ($GPUTRIAGE_FEED_FD, see src/trackers/job_feed.h): every
window (10 s by default) the tracker keys (``gpu/utilization_percent``,
``gpu/memory_used_mib``, ``gpu/memory_total_mib``, ``gputriage/...``), and, when
asked, the diagnosis so far. When the job calls ``wandb.init`` (hooked in
zero-code mode, and whenever ``gputriage`` is imported under a recorder), a
daemon thread logs each window into the run, and at exit the verdicts and
summary figures go to the run's summary.

W&B steps belong to the job: windows are logged with ``commit=False``, so they
join the job's next row and never move its step counter (a job that logs with
explicit ``step=`` is not disturbed). Charts use ``gputriage/time_s`` (seconds
since the run began) as their x-axis. A job that stops logging for two windows
gets rows of its own, and so do windows read together (those from before
``wandb.init``), so no window is lost. The summary is written when the job calls
``run.finish()`` (or ``wandb.finish()``), else at exit.
"""
import atexit
import os
import sys
import threading
import time

_FEED_MAGIC = "/memfd:gputriage-feed"
_POLL_S = 1.0
_SUMMARY_WAIT_S = 5.0


def _unescape(text):
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append({"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}.get(text[i + 1], text[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _open_feed():
    """The recorder's feed, read-only: the inherited descriptor when it is still
    the feed, else the recorder's /proc path; None without a recorder."""
    candidates = []
    fd = os.environ.get("GPUTRIAGE_FEED_FD", "")
    if fd.isdigit():
        candidates.append(f"/proc/self/fd/{fd}")
    if os.environ.get("GPUTRIAGE_FEED_PATH"):
        candidates.append(os.environ["GPUTRIAGE_FEED_PATH"])
    for path in candidates:
        try:
            if not os.readlink(path).startswith(_FEED_MAGIC):
                continue
            return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
    return None


class Bridge:
    """Reads the feed from where it left off and logs into one W&B run."""

    def __init__(self, run, feed_fd):
        self.run = run
        self.fd = feed_fd
        self.offset = 0
        self.partial = b""
        self.summaries = {}   # nonce -> {"figures": {}, "verdicts": [], "done": bool}
        self.started = time.time()
        self.lock = threading.Lock()
        self.quiet_windows = 0
        self.last_step = None
        self.stopped = threading.Event()
        try:
            run.define_metric("gputriage/time_s")
            for pattern in ("gpu/*", "gputriage/*"):
                run.define_metric(pattern, step_metric="gputriage/time_s")
        except Exception:
            pass  # an old SDK: the keys are logged all the same
        self.thread = threading.Thread(target=self._loop, name="gputriage-wandb", daemon=True)
        self.thread.start()

    def _lines(self):
        chunks = []
        while True:
            data = os.pread(self.fd, 1 << 16, self.offset)
            if not data:
                break
            self.offset += len(data)
            chunks.append(data)
        text = self.partial + b"".join(chunks)
        *lines, self.partial = text.split(b"\n")
        return [line.decode("utf-8", "replace") for line in lines]

    def poll(self):
        with self.lock:
            lines = self._lines()
            points = [line.split("\t") for line in lines if line.startswith("point\t")]
            for n, fields in enumerate(points):
                if len(fields) >= 3:
                    # Windows read together: all but the last in rows of their own.
                    self._log_point(int(fields[1]), fields[3:], own_row=n + 1 < len(points))
            for line in lines:
                fields = line.split("\t")
                if fields[0] == "point":
                    continue
                elif fields[0] == "summary" and len(fields) >= 3:
                    s = self.summaries.setdefault(_unescape(fields[1]), {"figures": {}, "verdicts": [], "done": False})
                    if fields[2] == "figure" and len(fields) == 5:
                        s["figures"][_unescape(fields[3])] = float(fields[4])
                    elif fields[2] == "verdict" and len(fields) == 6:
                        s["verdicts"].append((_unescape(fields[3]), fields[4], _unescape(fields[5])))
                    elif fields[2] == "end":
                        s["done"] = True

    def _log_point(self, t_ns, pairs, own_row=False):
        row = {"gputriage/time_s": t_ns / 1e9 - self.started}
        for pair in pairs:
            key, _, value = pair.rpartition("=")
            try:
                row[_unescape(key)] = float(value)
            except ValueError:
                continue
        step = getattr(self.run, "step", None)
        # The job's row if it keeps logging; a row of our own if it has stopped.
        self.quiet_windows = self.quiet_windows + 1 if step == self.last_step else 0
        self.last_step = step
        self.run.log(row, commit=own_row or self.quiet_windows >= 2)

    def _loop(self):
        while not self.stopped.wait(_POLL_S):
            try:
                self.poll()
            except Exception as e:  # never break the job
                sys.stderr.write(f"gputriage: W&B logging stopped: {e!r}\n")
                return

    def finish(self):
        """Before the run ends (run.finish, or exit before W&B's own hook): the
        last windows, then the verdicts. Once."""
        if self.stopped.is_set():
            return
        self.stopped.set()
        try:
            from gputriage import _markers
            _markers._auto_step_end(None)  # the last step ends now, not after us
            from gputriage import job_config
            nonce = f"{os.getpid()}-{time.time_ns()}"
            if not job_config.request(f"summary {nonce}"):
                self.poll()
                return
            deadline = time.time() + _SUMMARY_WAIT_S
            while time.time() < deadline:
                self.poll()
                if self.summaries.get(nonce, {}).get("done"):
                    break
                time.sleep(0.05)
            s = self.summaries.get(nonce)
            if s is None or not s["done"]:
                sys.stderr.write("gputriage: the recorder did not answer in time: no verdicts in the W&B summary\n")
                return
            summary = {f"gputriage/summary/{k}": v for k, v in s["figures"].items()}
            summary["gputriage/verdicts"] = ", ".join(f"{v} ({sev})" for v, sev, _ in s["verdicts"]) or "none"
            for verdict, severity, title in s["verdicts"]:
                summary[f"gputriage/verdict/{verdict}"] = severity
            if s["verdicts"]:
                summary["gputriage/top_verdict"] = s["verdicts"][0][0]
                summary["gputriage/top_verdict_title"] = s["verdicts"][0][2]
            self.run.summary.update(summary)
        except Exception as e:
            sys.stderr.write(f"gputriage: W&B summary not written: {e!r}\n")


_bridges = {}


def attach(run=None):
    """Logs this recorder's figures into `run` (default: wandb.run). Returns the
    Bridge, or None without a recorder or a run. Idempotent per run."""
    if run is None:
        wandb = sys.modules.get("wandb")
        run = getattr(wandb, "run", None) if wandb else None
    if run is None:
        return None
    if id(run) in _bridges:
        return _bridges[id(run)]
    fd = _open_feed()
    if fd is None:
        return None
    bridge = Bridge(run, fd)
    _bridges[id(run)] = bridge
    # Registered after wandb.init's own exit hook, so it runs first (LIFO).
    atexit.register(bridge.finish)
    # A job that ends its run itself: the summary goes in just before.
    original_finish = getattr(run, "finish", None)
    if original_finish is not None:
        def finish(*args, **kwargs):
            bridge.finish()
            return original_finish(*args, **kwargs)

        try:
            run.finish = finish
        except Exception:
            pass  # an SDK whose runs refuse it: the exit hook still writes the summary
    return bridge


def patch_wandb(module):
    """Hooks wandb.init: every run the job starts gets the bridge."""
    original = getattr(module, "init", None)
    if original is None or getattr(original, "_gputriage", False):
        return

    def init(*args, **kwargs):
        run = original(*args, **kwargs)
        try:
            attach(run)
        except Exception as e:  # never break the user's run
            sys.stderr.write(f"gputriage: W&B logging is off: {e!r}\n")
        return run

    init._gputriage = True
    init.__wrapped__ = original
    init.__doc__ = original.__doc__
    module.init = init
