"""Memory at the end of each step, told to the recorder (docs/memory.md).

Under ``gputriage record`` (zero-code mode and ``gputriage.watch``), as a step
ends, at most once every GPUTRIAGE_MEMORY_INTERVAL_MS (10 ms; 0 samples every
step, ``off`` turns it off):

- the host: this process's resident set (``/proc/self/statm``) and its
  high-water mark (``VmHWM``), read and never reset (resetting it through
  ``clear_refs`` would change what the job's own ``getrusage`` says);
- each CUDA device whose caching allocator this process uses: allocated bytes,
  their peak, reserved bytes, allocator retries and out-of-memory errors, from
  ``torch.cuda.memory_stats_as_nested_dict`` (one call per device: the flat
  ``memory_stats`` rebuilds a dict of ~100 keys). The peak is PyTorch's since
  the process started: ``reset_peak_memory_stats`` would change what the job's
  own ``max_memory_allocated()`` says.

Once the job has trained (an optimizer stepped), what every step keeps whatever
its batch: the bytes of the parameters (and buffers), gradients and optimizer
state, counted from the model and the optimizers as a user's own script would,
on the device that holds most of them; with the device's and the host's
capacity, sent as ``memory.*`` settings.

A stand-in for ``torch.cuda`` (``cuda=``) runs the same code where no GPU is.
"""
import os
import sys
import weakref

from gputriage import _markers
from gputriage import job_config as _config

HOST = -1
_DEFAULT_INTERVAL_MS = 10
_models = weakref.WeakSet()      # top modules zero-code mode saw run a forward
_optimizers = weakref.WeakSet()  # every optimizer created


def note_model(module):
    """A top module ran a forward (zero-code mode, once per step). Never raises:
    a module that cannot be hashed or weakly referenced is not counted."""
    try:
        if len(_models) < 8 and module not in _models:
            _models.add(module)
    except TypeError:
        pass


def note_optimizer(optimizer):
    if len(_optimizers) < 16:
        _optimizers.add(optimizer)


class TorchCuda:
    """What the sampler reads of torch.cuda; tests hand the sampler a stand-in
    with the same methods."""

    def __init__(self, torch):
        self._cuda = torch.cuda

    def ready(self):
        """CUDA is initialised in this process (the sampler never initialises it)."""
        return self._cuda.is_initialized()

    def device_count(self):
        return self._cuda.device_count()

    def stats(self, device):
        """The allocator's nested statistics (memory_stats_as_nested_dict's form)."""
        return self._cuda.memory_stats_as_nested_dict(device)

    def total_bytes(self, device):
        return int(self._cuda.get_device_properties(device).total_memory)


def _stat(stats, name, kind="current"):
    try:
        return int(stats[name]["all"][kind])
    except (KeyError, TypeError, ValueError):
        return 0


def _host_limit():
    """The memory this process may use on the host, and what says so: the
    tightest cgroup limit on its way to the root, else the machine's memory."""
    total = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    total = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    limit, source = total, "MemTotal"
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3 or parts[0] != "0":
            continue  # cgroup v2's line only
        path = parts[2]
        while True:
            try:
                with open(f"/sys/fs/cgroup{path.rstrip('/')}/memory.max") as f:
                    text = f.read().strip()
                if text.isdigit() and (limit is None or int(text) < limit):
                    limit, source = int(text), f"cgroup memory.max ({path or '/'})"
            except OSError:
                pass
            if path in ("", "/"):
                break
            path = os.path.dirname(path.rstrip("/"))
    return limit, source


class MemorySampler:
    """Called with a step's number as it ends (markers_module's interval
    applies); sends the step's memory as step_memory markers."""

    def __init__(self, cuda=None, proc_self="/proc/self"):
        self._proc = proc_self
        self._pid = None
        self._statm = self._status = None
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._cuda = cuda            # a TorchCuda or stand-in; found when torch has CUDA up
        self._cuda_given = cuda is not None
        self._in_use = []            # CUDA devices whose allocator holds memory
        self._calls = 0
        self._totals_sent = set()
        self._static_sent = False
        self.trained = lambda: True  # zero-code mode: whether an optimizer has stepped

    def _open(self):
        for fd in (self._statm, self._status):
            if fd is not None:
                os.close(fd)
        self._pid = os.getpid()  # a forked process reads its own /proc files
        self._statm = os.open(f"{self._proc}/statm", os.O_RDONLY | os.O_CLOEXEC)
        self._status = os.open(f"{self._proc}/status", os.O_RDONLY | os.O_CLOEXEC)

    def host(self):
        """(resident bytes, high-water mark bytes) of this process."""
        if self._pid != os.getpid():
            self._open()
        rss = int(os.pread(self._statm, 128, 0).split()[1]) * self._page
        status = os.pread(self._status, 8192, 0)
        at = status.find(b"VmHWM:")
        hwm = int(status[at + 6:status.index(b"kB", at)]) * 1024 if at >= 0 else rss
        return rss, max(rss, hwm)

    def _cuda_source(self):
        if self._cuda is None and not self._cuda_given:
            torch = sys.modules.get("torch")
            if torch is None or not getattr(torch, "cuda", None) or not torch.cuda.is_available():
                return None
            self._cuda = TorchCuda(torch)
        if self._cuda is None or not self._cuda.ready():
            return None
        return self._cuda

    def _devices(self, cuda):
        """The devices to read: those in use, every one again each 100th call
        (a job may move to another device)."""
        if self._calls % 100 == 1 or not self._in_use:
            self._in_use = list(range(cuda.device_count()))
        return self._in_use

    def __call__(self, step):
        self._calls += 1
        rss, hwm = self.host()
        _markers.step_memory(step, HOST, rss, hwm, 0)
        cuda = self._cuda_source()
        if cuda is not None:
            in_use = []
            for device in self._devices(cuda):
                stats = cuda.stats(device)
                reserved = _stat(stats, "reserved_bytes")
                if reserved <= 0:
                    continue
                in_use.append(device)
                _markers.step_memory(step, device, _stat(stats, "allocated_bytes"),
                                     _stat(stats, "allocated_bytes", "peak"), reserved)
                _markers.step_memory_events(step, device, int(stats.get("num_alloc_retries", 0) or 0),
                                            int(stats.get("num_ooms", 0) or 0))
                self._send_total(cuda, device)
            self._in_use = in_use
        if not self._static_sent and self.trained():
            self.send_static(cuda)

    def _send_total(self, cuda, device):
        if device in self._totals_sent:
            return
        self._totals_sent.add(device)
        try:
            _config._send(f"memory.cuda{device}.total_bytes", cuda.total_bytes(device))
        except Exception:
            pass

    def send_static(self, cuda=None):
        """Parameters, gradients and optimizer state, counted once, as memory.* settings."""
        self._static_sent = True
        by_device = static_bytes(list(_models), list(_optimizers))
        if not by_device:
            return
        device = max(by_device, key=lambda d: sum(by_device[d].values()))
        for kind, count in by_device[device].items():
            _config._send(f"memory.{kind}_bytes", count)
        _config._send("memory.static_device", device)


def static_bytes(models, optimizers):
    """{device: {"parameters": bytes, "gradients": bytes, "optimizer_state": bytes}}
    over the models' parameters and buffers and the optimizers' parameters and
    state, each tensor once."""
    seen = set()
    out = {}

    def add(tensor, kind):
        if tensor is None or not hasattr(tensor, "element_size") or id(tensor) in seen:
            return
        seen.add(id(tensor))
        device = str(tensor.device)
        counts = out.setdefault(device, {"parameters": 0, "gradients": 0, "optimizer_state": 0})
        counts[kind] += tensor.numel() * tensor.element_size()

    params = []
    for model in models:
        params.extend(model.parameters())
        for buffer in model.buffers():
            add(buffer, "parameters")
    for optimizer in optimizers:
        for group in getattr(optimizer, "param_groups", []):
            params.extend(group.get("params", []))
    for p in params:
        add(p, "parameters")
    trained = {id(p) for optimizer in optimizers for group in getattr(optimizer, "param_groups", [])
               for p in group.get("params", [])}
    for p in params:
        grad = getattr(p, "grad", None)
        if grad is not None:
            add(grad, "gradients")
        elif id(p) in trained and getattr(p, "requires_grad", False) and ("grad", id(p)) not in seen:
            # A loop that zeroes its gradients to None after the step: they take
            # the parameter's size while backward runs.
            seen.add(("grad", id(p)))
            counts = out.setdefault(str(p.device), {"parameters": 0, "gradients": 0, "optimizer_state": 0})
            counts["gradients"] += p.numel() * p.element_size()
    for optimizer in optimizers:
        for state in getattr(optimizer, "state", {}).values():
            if isinstance(state, dict):
                for value in state.values():
                    if getattr(value, "dim", None) is not None and value.dim() > 0:  # step counters are scalars
                        add(value, "optimizer_state")
    return out


# ---- Out of memory: the error that ends the job, as it propagates ----------

_UNITS = {"bytes": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
_SIZE = r"([0-9.]+) ?(bytes|B|KiB|MiB|GiB|TiB)"
# PyTorch's CUDA caching allocator (2.1 and later, then up to 2.0) and its CPU allocator.
_OOM_FIELDS = [
    ("requested_bytes", r"Tried to allocate " + _SIZE),
    ("total_bytes", r"total capac\w* of " + _SIZE),
    ("total_bytes", _SIZE + r" total capacity"),
    ("free_bytes", r"of which " + _SIZE + r" is free"),
    ("free_bytes", _SIZE + r" free;"),
    ("allocated_bytes", r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch"),
    ("allocated_bytes", _SIZE + r" already allocated"),
    ("reserved_unallocated_bytes", _SIZE + r" is reserved by PyTorch but unallocated"),
    ("reserved_bytes", _SIZE + r" reserved in total by PyTorch"),
]


def parse_oom(text):
    """The figures of an out-of-memory error's message, or None when it is not
    one: {"device": "cuda:0" or "cpu", "requested_bytes": ..., ...} (sizes as
    PyTorch printed them, to its rounding)."""
    import re
    cpu = re.search(r"can't allocate memory: you tried to allocate ([0-9]+) bytes", text)
    if cpu:
        return {"device": "cpu", "requested_bytes": int(cpu.group(1))}
    if "out of memory" not in text.lower():
        return None
    gpu = re.search(r"\bGPU (\d+)", text)
    out = {"device": f"cuda:{gpu.group(1)}" if gpu else "cuda"}
    for key, pattern in _OOM_FIELDS:
        found = re.search(pattern, text)
        if found and key not in out:
            out[key] = int(float(found.group(1)) * _UNITS[found.group(2).lower()])
    if "reserved_unallocated_bytes" not in out and "reserved_bytes" in out and "allocated_bytes" in out:
        out["reserved_unallocated_bytes"] = max(0, out["reserved_bytes"] - out["allocated_bytes"])
    return out


def _user_frame(tb):
    """The innermost frame of the traceback outside PyTorch and this package:
    the job's own line that asked for the memory."""
    where = None
    while tb is not None:
        code = tb.tb_frame.f_code
        path = code.co_filename.replace("\\", "/")
        if "/torch/" not in path and "/gputriage/" not in path:
            where = f"{path}:{tb.tb_lineno} in {code.co_name}"
        tb = tb.tb_next
    return where


def _host_figures():
    """The process's memory on the host as the error leaves: resident set and
    address space (/proc/self/status), the address-space limit (RLIMIT_AS, what
    `ulimit -v` sets) and the memory it may use (cgroup or MemTotal), as oom.*
    figures. An address-space limit counts what is reserved and never touched
    (thread stacks, the allocator's arenas, mapped libraries): a job can hit it
    with most of the machine free."""
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                # The peaks too: by the time the error is reported the failing
                # step's tensors were freed as it unwound.
                key = {"VmRSS:": "host_rss_bytes", "VmHWM:": "host_rss_peak_bytes", "VmSize:": "host_vm_bytes",
                       "VmPeak:": "host_vm_peak_bytes"}.get(line.split(":", 1)[0] + ":")
                if key:
                    out[key] = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            out["address_space_limit_bytes"] = int(soft)
    except (ImportError, OSError, ValueError):
        pass
    limit, source = _host_limit()
    if limit:
        out["host_limit_bytes"], out["host_limit_source"] = limit, source
    return out


def report_oom(exc, tb=None, cuda=None):
    """Tells the recorder of an out-of-memory error (oom.* settings): what was
    asked for, what the device held, where, and with --memory-history the
    allocator's snapshot. Returns the figures, or None when `exc` is no OOM."""
    details = parse_oom(str(exc))
    if details is None:
        return None
    details["where"] = _user_frame(tb if tb is not None else getattr(exc, "__traceback__", None))
    details["step"] = _markers._last_step()
    device = details["device"]
    cuda = cuda or (_sampler._cuda_source() if _sampler is not None else None)
    if cuda is not None and device.startswith("cuda:"):
        try:  # the allocator's own state, to the byte, beside the message's rounded figures
            stats = cuda.stats(int(device[5:]))
            details["allocator_allocated_bytes"] = _stat(stats, "allocated_bytes")
            details["allocator_reserved_bytes"] = _stat(stats, "reserved_bytes")
            details["allocator_peak_bytes"] = _stat(stats, "allocated_bytes", "peak")
            details["allocator_retries"] = int(stats.get("num_alloc_retries", 0) or 0)
        except Exception:
            pass
    history = os.environ.get("GPUTRIAGE_MEMORY_HISTORY")
    if history and device.startswith("cuda"):
        try:
            import torch
            torch.cuda.memory._dump_snapshot(history)
            details["snapshot"] = history
        except Exception as e:
            details["snapshot_error"] = repr(e)[:300]
    if device == "cpu":
        details.update(_host_figures())
    if _sampler is not None and not getattr(_sampler, "_static_sent", False):
        try:  # the error came before a step ended trained: count the static memory now
            _sampler.send_static()
        except Exception:
            pass
    details["message"] = " ".join(str(exc).split())[:600]
    details["exception"] = type(exc).__name__
    for key, value in details.items():
        if value is not None:
            _config._send(f"oom.{key}", value)
    return details


def _start_history():
    """--memory-history: PyTorch keeps its allocator's history from here on, so
    an OOM's snapshot shows what was allocated, where, and when."""
    if not os.environ.get("GPUTRIAGE_MEMORY_HISTORY"):
        return
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            record = torch.cuda.memory._record_memory_history
            try:
                record(max_entries=100000)
            except TypeError:  # PyTorch 2.0: (enabled, ...)
                record(True)
            _config._send("memory.history", "recording")
    except Exception as e:
        _config._send("memory.history", f"not recording: {e!r}"[:300])


_hooks_installed = False
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _filtered(t):
    """Traceback `t` without the frames of this package's files; None when every frame is ours."""
    first = previous = None
    while t is not None:
        if not t.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIR):
            if previous is None:
                first = t
            else:
                previous.tb_next = t
            previous = t
        t = t.tb_next
    if previous is not None:
        previous.tb_next = None
    return first


def _without_our_frames(value, tb):
    """The traceback without zero-code mode's own frames (its hooks around the
    job's DataLoader, module and optimizer calls): an error the job raised reads
    as if nothing stood between its lines and PyTorch's; chained errors too. An
    error in our own code keeps every frame."""
    tb = _filtered(tb) or tb
    if value is None:
        return tb
    value.__traceback__ = tb
    seen, chained = {id(value)}, value.__cause__ or value.__context__
    while chained is not None and id(chained) not in seen:
        seen.add(id(chained))
        kept = _filtered(chained.__traceback__)
        if kept is not None:
            chained.__traceback__ = kept
        chained = chained.__cause__ or chained.__context__
    return tb


def install_oom_hooks():
    """An out-of-memory error that ends the job (uncaught, on any thread) is
    reported as it leaves; the job's own hooks still run after ours."""
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    import threading
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        try:
            report_oom(value, tb)
        except Exception:
            pass
        try:
            tb = _without_our_frames(value, tb)
        except Exception:  # the traceback as it was: never lose the job's error
            pass
        previous(kind, value, tb)

    sys.excepthook = excepthook
    previous_thread = threading.excepthook

    def thread_excepthook(args):
        try:
            report_oom(args.exc_value, args.exc_traceback)
        except Exception:
            pass
        previous_thread(args)

    threading.excepthook = thread_excepthook


_sampler = None


def start(cuda=None, trained=None):
    """Samples memory at step ends from here on (under a recorder; idempotent).
    Returns the sampler, or None when off or without a recorder."""
    global _sampler
    if _sampler is not None:
        return _sampler
    if not _markers.enabled():
        return None
    install_oom_hooks()  # whether or not memory is sampled
    setting = os.environ.get("GPUTRIAGE_MEMORY_INTERVAL_MS", str(_DEFAULT_INTERVAL_MS)).strip().lower()
    if setting in ("off", "none", ""):
        return None
    try:
        interval_ms = float(setting)
    except ValueError:
        sys.stderr.write(f"gputriage: GPUTRIAGE_MEMORY_INTERVAL_MS={setting!r} is not a number of ms or 'off': "
                         f"{_DEFAULT_INTERVAL_MS} ms\n")
        interval_ms = _DEFAULT_INTERVAL_MS
    try:
        sampler = MemorySampler(cuda)
        sampler.host()  # /proc readable: else no sampler at all
    except (OSError, ValueError) as e:
        sys.stderr.write(f"gputriage: memory is not sampled: {e}\n")
        return None
    if trained is not None:
        sampler.trained = trained
    limit, source = _host_limit()
    if limit:
        _config._send("memory.host_total_bytes", limit)
        _config._send("memory.host_limit_source", source)
    _markers._set_memory_sampler(sampler, int(max(0.0, interval_ms) * 1e6))
    _sampler = sampler
    _start_history()
    install_oom_hooks()
    return sampler
