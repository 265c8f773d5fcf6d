#!/usr/bin/env python3
"""Hostile-input campaign (issue 12): every reader of `gputriage diagnose` fed
truncated, oversized, out-of-range, wrongly encoded, non-seekable and adversarial
input. Each input runs in its own process under a time limit; the campaign fails
on a crash (a signal, a sanitizer report), a hang (the limit), memory past the
bound, or silent loss: damaged input answered with exit 0 and no word of the
damage, or a different answer through a pipe than from the file.

    python3 tests/hostile/hostile_inputs.py GPUTRIAGE DATA_DIR [--quick] [--report FILE]

Prints one line per input class and the totals (inputs tried, max RSS, max time)
that docs/hostile-inputs.md quotes.
"""
import concurrent.futures
import gzip
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import zlib

TIME_LIMIT_S = 120          # a hang, not a slow input
RSS_LIMIT_MB = 1024         # bounded memory: far above any input's need, far below its size
BOMB_MB = 2048              # a gzip bomb: 2 GiB of zeros in ~2 MB


def base_inputs(data):
    """One real input per reader."""
    t = os.path.join(data, "traces")
    m = os.path.join(data, "metrics")
    return {
        "kineto": gzip.open(os.path.join(t, "kineto-resnet50-v100", "num_workers_0.pt.trace.json.gz")).read(),
        "smi-q": open(os.path.join(m, "nvidia-smi", "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt"), "rb").read(),
        "dcgm-exporter": open(os.path.join(m, "dcgm-exporter", "datadog_t4_idle_metrics.txt"), "rb").read(),
        "smi-csv": smi_csv(2000),
        "smi-dmon": dmon(2000),
        "dcgmi-dmon": dcgmi(2000),
    }


def smi_csv(rows):
    out = ["timestamp, index, name, utilization.gpu [%], power.draw [W], memory.used [MiB]"]
    for i in range(rows):
        out.append(f"2026/11/01 10:{i // 60 % 60:02d}:{i % 60:02d}.000, 0, NVIDIA H100 80GB HBM3, "
                   f"{(i * 37) % 101} %, {100 + i % 400}.00 W, 40000 MiB")
    return ("\n".join(out) + "\n").encode()


def dmon(rows):
    out = ["#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk",
           "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %      %      %    MHz    MHz"]
    for i in range(rows):
        out.append(f" 20261101   10:{i // 60 % 60:02d}:{i % 60:02d}      0    {200 + i % 300}     40      -     {i % 100}"
                   f"     {i % 50}      0      0      0      0   2619   1980")
    return ("\n".join(out) + "\n").encode()


def dcgmi(rows):
    out = ["#Entity   GPUTL  POWER  SMACT  TENSO", "ID               W                 "]
    for i in range(rows):
        out.append(f"GPU 0     {i % 100}     {200 + i % 300}.0  0.{i % 100:02d}  0.{i % 50:02d}")
    return ("\n".join(out) + "\n").encode()


def variants(name, raw):
    """(class, label, bytes, damaged): damaged inputs must not pass silently."""
    n = len(raw)
    for frac in (0.001, 0.1, 0.5, 0.9, 0.999):
        cut = max(1, int(n * frac))
        # A cut exactly at a line end leaves a valid, shorter log that no reader
        # could tell from a whole one: cut inside a line.
        while cut > 1 and raw[cut - 1:cut] in (b"\n", b"\r"):
            cut -= 1
        yield "truncated", f"{name} cut at {frac:.1%}", raw[:cut], True
        gz = gzip.compress(raw)
        yield "truncated", f"{name}.gz cut at {frac:.1%}", gz[:max(2, int(len(gz) * frac))], True
    yield "oversized", f"{name} + a 64 MiB line", raw + b"x" * (64 << 20) + b"\n", True
    yield "oversized", f"{name} with 100k columns", b",".join([b"col"] * 100000) + b"\n" + raw, True
    yield "out-of-range", f"{name} with impossible numbers", raw.replace(b" 0,", b" 1e308,").replace(b"%", b"-250 %"), True
    yield "encoding", f"{name} as UTF-16LE with BOM", b"\xff\xfe" + raw.decode("latin-1").encode("utf-16-le"), False
    yield "encoding", f"{name} as UTF-16BE with BOM", b"\xfe\xff" + raw.decode("latin-1").encode("utf-16-be"), False
    yield "encoding", f"{name} with a UTF-8 BOM and CRLF", b"\xef\xbb\xbf" + raw.replace(b"\n", b"\r\n"), False
    yield "encoding", f"{name} with invalid UTF-8 and NULs", raw[: n // 2] + b"\xff\xfe\x00\xc3\x28\x00" + raw[n // 2:], True
    # CR line ends: whitespace to JSON, one endless line to a line-based log.
    yield "encoding", f"{name} with CR line ends", raw.replace(b"\n", b"\r"), name != "kineto"
    yield "adversarial", f"{name} twice in one file", raw + raw, False
    yield "adversarial", f"{name} with escapes in every line", raw.replace(b"\n", b"\x1b]0;pwned\x07\x1b[2J\n"), True


def adversarial_only():
    yield "adversarial", f"gzip bomb ({BOMB_MB} MiB of zeros)", bomb(), True
    yield "adversarial", "gzip bomb of a JSON string", gzip.compress(b'{"traceEvents": [{"name": "' + b"a" * (256 << 20) + b'"}]}'), True
    yield "adversarial", "JSON nested 1,000,000 deep", b"[" * 1000000 + b"]" * 1000000, True
    yield "adversarial", "concatenated gzip members with garbage", gzip.compress(b"a,b\n") + b"\x00" * 64 + b"garbage", True
    yield "adversarial", "100k dcgm-exporter GPUs", b"".join(
        b'DCGM_FI_DEV_GPU_UTIL{gpu="%d",UUID="GPU-%d"} 50\n' % (i, i) for i in range(100000)), True
    yield "adversarial", "a 16 MiB label value", b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="' + b"u" * (16 << 20) + b'"} 50\n', True
    yield "adversarial", "empty", b"", True
    yield "adversarial", "only whitespace", b" \n\t\r\n" * 1000, True
    yield "adversarial", "binary noise", os.urandom(1 << 20), True


def sqlite_cases(data):
    """Nsight Systems exports: damaged, foreign, and with unexpected columns or
    values. (label, bytes, damaged); read from files only (SQLite is random access)."""
    export = open(os.path.join(data, "traces", "nsys", "rtx3060_smoke_nsys2025.5.2.sqlite"), "rb").read()
    n = len(export)
    for frac in (0.01, 0.3, 0.7, 0.99):
        yield f"nsys export cut at {frac:.0%}", export[:max(100, int(n * frac))], True
    noisy = bytearray(export)
    noisy[n // 3:n // 3 + 8192] = os.urandom(8192)
    yield "nsys export with 8 KiB of noise a third in", bytes(noisy), True
    yield "nsys export with its header only", export[:100], True

    def made(sql):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.sqlite")
            db = sqlite3.connect(path)
            db.executescript(sql)
            db.commit()
            db.close()
            return open(path, "rb").read()
    yield "a SQLite file that is not an export", made("CREATE TABLE runs (id INTEGER); INSERT INTO runs VALUES (1);"), True
    yield "an export whose kernel table lacks its start column", made(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT); INSERT INTO StringIds VALUES (1, 'k');"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (finish INTEGER, deviceId INTEGER, streamId INTEGER, demangledName INTEGER);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (5, 0, 7, 1);"), True
    yield "an export with text, NULL and huge values in its kernel rows", made(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT); INSERT INTO StringIds VALUES (1, 'k');"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER,"
        " globalPid INTEGER, demangledName INTEGER, gridX, gridY, gridZ, blockX, blockY, blockZ);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10, 20, 0, 7, 0, 1, 1, 1, 1, 1, 1, 1);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ('x', 20, 0, 7, 0, 1, 1, 1, 1, 1, 1, 1);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (NULL, NULL, 0, 7, 0, 99, 'a', 1e300, -5, 1, 1, 1);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (30, 9223372036854775807, 1e300, -1, 'p', 1, 1, 1, 1, 1, 1, 1);"), True


def bomb():
    """One gzip member of BOMB_MB MiB of zeros (about 2 MB compressed)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\x00" * (1 << 20)
    parts = [c.compress(chunk) for _ in range(BOMB_MB)]
    parts.append(c.flush())
    return b"".join(parts)


def run(binary, path, stdin_path=None, extra=()):
    """(exit code or -signal, seconds, max RSS MB, stdout, stderr)."""
    # /usr/bin/time measures the reader's own peak RSS (a child forked from this
    # Python would count the generator's memory until its exec).
    rss_file = path + ".rss"
    cmd = ["/usr/bin/time", "-f", "%M", "-o", rss_file, binary, "diagnose", "--json", *extra,
           "-" if stdin_path else path]
    start = time.monotonic()
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdin=stdin, stdout=out, stderr=err, start_new_session=True)
        deadline = start + TIME_LIMIT_S
        while True:
            pid, st = os.waitpid(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                os.waitpid(proc.pid, 0)
                return "hang", time.monotonic() - start, 0.0, b"", b""
            time.sleep(0.01)
        if stdin_path:
            stdin.close()
        code = os.waitstatus_to_exitcode(st)
        out.seek(0)
        err.seek(0)
        try:
            with open(rss_file) as f:
                lines = f.read().split()
            rss_mb = float(lines[-1]) / 1024
            os.remove(rss_file)
        except (OSError, ValueError, IndexError):
            rss_mb = float("nan")
        return code, time.monotonic() - start, rss_mb, out.read(), err.read()


def mentions_damage(stdout):
    """A report that says something was wrong: an import issue, a truncation, a rejection."""
    try:
        report = json.loads(stdout)
    except ValueError:
        return False
    for rec in report.get("recordings", []):
        imp = rec.get("import") or {}
        if imp.get("truncated") or imp.get("issues"):
            return True
    return bool(report.get("notes"))


def main():
    binary, data = sys.argv[1], sys.argv[2]
    quick = "--quick" in sys.argv
    jobs = int(sys.argv[sys.argv.index("--jobs") + 1]) if "--jobs" in sys.argv else 1
    report_path = sys.argv[sys.argv.index("--report") + 1] if "--report" in sys.argv else None
    tmp = tempfile.mkdtemp(prefix="gputriage_hostile_")
    results, failures = [], []
    def cases():  # generated one at a time: memory stays that of one input
        for name, raw in base_inputs(data).items():
            yield from variants(name, raw)
        yield from adversarial_only()
        for label, payload, damaged in sqlite_cases(data):
            yield "sqlite", label, payload, damaged, True
    def judge(i, cls, label, payload, damaged, file_only=False):
        path = os.path.join(tmp, f"input_{i}")
        with open(path, "wb") as f:
            f.write(payload)
        code, secs, rss, out, err = run(binary, path)
        row = {"class": cls, "input": label, "bytes": len(payload), "exit": code, "seconds": secs, "rss_mb": rss}
        problems = []
        if code == "hang":
            problems.append(f"no answer in {TIME_LIMIT_S} s")
        elif code < 0 or code >= 128 or b"Sanitizer" in err:
            problems.append(f"crashed (exit {code}): {err[-300:].decode(errors='replace')}")
        elif code not in (0, 3):
            problems.append(f"unexpected exit {code}")
        elif code == 3 and not err.strip().startswith(b"gputriage: error:"):
            problems.append("an error without a message")
        elif code == 0 and damaged and not mentions_damage(out):
            problems.append("damaged input answered as if whole (no issue, truncation or note)")
        if rss > RSS_LIMIT_MB:
            problems.append(f"max RSS {rss:.0f} MB > {RSS_LIMIT_MB} MB")
        # A SQLite export is read from a file: through a pipe, a clear error that says so.
        if file_only and code in (0, 3):
            pcode, _, _, _, perr = run(binary, path, stdin_path=path)
            if pcode != 3 or b"not a pipe" not in perr:
                problems.append(f"through a pipe: exit {pcode}, not a clear error that an export is read from a file")
        # Non-seekable: the same answer through a pipe as from the file.
        elif code in (0, 3) and len(payload) < (256 << 20):
            pcode, psecs, prss, pout, perr = run(binary, path, stdin_path=path)
            row["pipe_seconds"], row["pipe_rss_mb"] = psecs, prss
            same = pcode == code and (code != 0 or summary(pout) == summary(out))
            if not same:
                problems.append(f"through a pipe: exit {pcode} vs {code}, or another summary")
            row["rss_mb"] = max(rss, prss)
            row["seconds"] = max(secs, psecs)
        row["problems"] = problems
        os.remove(path)
        return i, row

    try:
        # --jobs N: N inputs at a time (threads only wait on the reader processes);
        # at most N payloads are held, so memory stays that of N inputs.
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            pending, done = set(), []
            for i, (cls, label, payload, damaged, *file_only) in enumerate(cases()):
                if quick and i % 3:
                    continue
                pending.add(pool.submit(judge, i, cls, label, payload, damaged, *file_only))
                del payload
                if len(pending) >= jobs:
                    finished, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
                    done += [f.result() for f in finished]
            done += [f.result() for f in pending]
        for _, row in sorted(done, key=lambda r: r[0]):
            results.append(row)
            if row["problems"]:
                failures.append(row)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    by_class = {}
    for r in results:
        c = by_class.setdefault(r["class"], {"inputs": 0, "errors": 0, "reports": 0, "rss": 0.0, "secs": 0.0})
        c["inputs"] += 1
        c["errors"] += r["exit"] == 3
        c["reports"] += r["exit"] == 0
        c["rss"] = max(c["rss"], r["rss_mb"])
        c["secs"] = max(c["secs"], r["seconds"])
    for cls, c in by_class.items():
        print(f"{cls:<13} {c['inputs']:>4} inputs: {c['reports']:>3} reports, {c['errors']:>3} clear errors; "
              f"max RSS {c['rss']:.0f} MB, max {c['secs']:.1f} s")
    worst_rss = max(results, key=lambda r: r["rss_mb"])
    worst_time = max(results, key=lambda r: r["seconds"])
    print(f"total: {len(results)} inputs ({sum(r['bytes'] for r in results) / 1e6:.0f} MB), each also piped when under 256 MiB; "
          f"max RSS {worst_rss['rss_mb']:.0f} MB ({worst_rss['input']}), max time {worst_time['seconds']:.1f} s "
          f"({worst_time['input']}); {len(failures)} failures")
    if report_path:
        with open(report_path, "w") as f:
            json.dump(results, f, indent=1, default=str)
    for r in failures:
        print(f"FAIL: {r['class']}: {r['input']}: {'; '.join(r['problems'])}")
    return 1 if failures else 0


def summary(stdout):
    try:
        s = json.loads(stdout)["summary"]
    except (ValueError, KeyError):
        return None
    return json.dumps(s, sort_keys=True)


if __name__ == "__main__":
    sys.exit(main())
