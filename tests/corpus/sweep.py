#!/usr/bin/env python3
"""Runs gputriage over many recordings and checks rules that need no expected answer.

  sweep.py GPUTRIAGE LIST... [--root DIR] [--fetched CACHE] [--json OUT] [--show N]

LIST: one run a line, its files separated by spaces (the ranks of one job): paths
relative to --root (default: the repository) or absolute, or OWNER/NAME@COMMIT:PATH
for a public file fetch_cases.py --sweep-list brought into the --fetched cache; text
after `#` is a comment. Files not here are counted, not judged.

The invariants (issue 40), each violation a defect to fix as a class:
  data           every file yields events or samples; a file read as empty is named
  gain           every finding at moderate or above carries expected_gain with a
                 range and what bounds it
  severity_gain  a moderate or high finding's step-time gain is at least 5 %
                 (below it the fix is not what holds the step: low)
  idle_explained a GPU busy under half the observed time gets a finding that says why
  compute_limit  at_compute_limit (trace) only on a GPU whose peaks the spec table has
  percent        every percentage in the evidence within 0-100; MFU at most 100
  warmup         leading steps over 3x the median (of five or more) are left out of
                 the step averages the verdicts use as warm-up, and no others
  exit           gputriage exits 0 or 1 with a JSON report, or 3 with an error that
                 names the file (a format it does not read): never a crash or silence
  refused_gpu_data  a file refused with a clear error holds no GPU data: by this
                 script's own look at its bytes (nvidia-smi's table, -q or query
                 fields, numbers in its units, GPU uuids, DCGM names, trace kernels,
                 an allocator snapshot's keys, an export's CUPTI tables), never
                 gputriage's reading of it (issue 54)
  time_sum       a trace's device time adds up: over its steady steps, kernels,
                 copies, memsets, collective kernels and idle by cause make the
                 steps' time within 1 % (issue 54)
  dropped_records  kernel launch calls over twice the kernel records (and 100 more)
                 are said as records the profiler dropped, and never judged idle,
                 underutilized or launch-bound; said only where the counts show it

Other files it refuses with a clear error are counted and listed as rejected, apart.
Exits 1 when any invariant is violated.
"""
import argparse
import gzip
import json
import re
import os
import subprocess
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fetch_cases import cached_path, parse_public_entry  # noqa: E402 (the cache's layout)
from run_corpus import no_data  # noqa: E402 (the same rule the corpus applies)

# Verdicts that say why a GPU is idle much of the time.
EXPLAINS_IDLE = {"input_bound", "launch_bound", "idle", "communication_bound", "straggler_rank", "load_imbalance",
                 "host_stall", "copy_bound", "optimizer_bound", "idle_phases", "underutilized", "no_gpu_activity",
                 "utilization_unavailable", "video_engine_busy", "undersized_work", "unstable_step_time",
                 "host_saturated", "checkpoint_overhead", "evaluation_overhead"}
SEVERE = ("moderate", "high")
MIN_GAIN_PERCENT = 5.0
INVARIANTS = ["exit", "data", "gain", "severity_gain", "idle_explained", "compute_limit", "percent", "warmup",
              "refused_gpu_data", "time_sum", "dropped_records"]

# What only GPU recordings hold, looked for in a refused file's first MiB (bytes).
GPU_DATA_SIGNS = [
    (re.compile(rb"NVIDIA-SMI [0-9.]+ +Driver Version"), "nvidia-smi's table"),
    # The same table recorded from a terminal (`script`, a tmux log of `watch`):
    # escape sequences between its words.
    (re.compile(rb"NVIDIA-SMI [0-9.]+(\x1b\[[0-9;?]*[A-Za-z]|[ \r])+Driver Version"), "nvidia-smi's table (a terminal recording)"),
    (re.compile(rb"(?m)^# ?gpu +pid +type +sm"), "nvidia-smi pmon"),
    # nvidia-smi's own query timestamp ("2025/09/21 16:12:24.315") leading a row of fields.
    (re.compile(rb"(?m)^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}, "), "nvidia-smi's query rows"),
    # A script's own CSV header naming GPU utilization, above a row of numbers.
    (re.compile(rb"(?im)^[^\n]*\bgpu[ _.-]?util[^\n]*\n[^\n]*\d+[^\n]*\d"), "a GPU-utilization column"),
    (re.compile(rb"=+NVSMI LOG=+"), "nvidia-smi -q"),
    # Field names in a query's header (at a line's start or after a comma), not in
    # `--help-query-gpu`'s quoted list; DCGM names with a sample's value, not in
    # dcgm-exporter's metrics configuration.
    (re.compile(rb"(?m)(^|, ?)(utilization\.gpu|memory\.used|power\.draw)( \[[^\]\n]+\])? *(,|\r?$)"),
     "--query-gpu fields"),
    (re.compile(rb"\b\d{1,3} ?%, *\d+ ?MiB\b|\b\d+ ?MiB, *\d+ ?MiB\b|\b\d+\.\d\d ?W\b"), "numbers in nvidia-smi's units"),
    (re.compile(rb"GPU-[0-9a-f]{8}-[0-9a-f]{4}-"), "a GPU uuid"),
    (re.compile(rb"DCGM_FI_[A-Z0-9_]+(\{[^}\n]*\})? +[-+0-9.eE]+"), "DCGM field names"),
    (re.compile(rb'"cat" ?: ?"kernel"'), "trace kernels"),
    (re.compile(rb"device_traces.{0,200}segments|segments.{0,400}device_traces", re.S), "an allocator snapshot"),
    (re.compile(rb"CUPTI_ACTIVITY_KIND_(KERNEL|MEMCPY)"), "an export's CUPTI tables"),
]


def gpu_data_sign(path):
    """What GPU data a file's first MiB shows ("" for none), decompressed first."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 20)
        if head[:2] == b"\x1f\x8b":
            head = gzip.decompress(head) if len(head) < (1 << 20) else gzip.GzipFile(path).read(1 << 20)
    except (OSError, EOFError, gzip.BadGzipFile):
        return ""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        head = head.decode("utf-16", errors="replace").encode()
    for pattern, what in GPU_DATA_SIGNS:
        if pattern.search(head):
            return what
    return ""


def resolve(entry, root, fetched):
    """A list entry's local path: OWNER/NAME@COMMIT:PATH in the fetch cache, else a path."""
    fetch = parse_public_entry(entry)
    if fetch:
        return cached_path(fetched or "/nonexistent", fetch)
    return entry if os.path.isabs(entry) else os.path.join(root, entry)


def read_list(path, root, fetched=""):
    runs = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            text = line.split("#", 1)[0].strip()
            if text:
                runs.append((f"{os.path.basename(path)}:{number}", [resolve(e, root, fetched) for e in text.split()],
                             [repo_of(e) for e in text.split()]))
    return runs


def committed_sources():
    """Each committed corpus file's source repository (from cases.toml)."""
    with open(os.path.join(HERE, "cases.toml"), "rb") as f:
        cases = tomllib.load(f)["case"]
    out = {}
    for c in cases:
        source = c.get("source", "")
        repo = source.split("@", 1)[0] if "@" in source else RECORDED_HERE
        for path in c.get("files", []):
            out[path] = repo
    return out


_SOURCES = None
RECORDED_HERE = "this repository (recorded here)"


def repo_of(entry):
    """The public repository a list entry comes from: its own OWNER/NAME, or a committed
    file's case source."""
    global _SOURCES
    fetch = parse_public_entry(entry)
    if fetch:
        return fetch["repo"]
    if _SOURCES is None:
        _SOURCES = committed_sources()
    if entry in _SOURCES:
        return _SOURCES[entry]
    directory = os.path.dirname(entry)  # a trace directory's other ranks
    found = next((r for p, r in _SOURCES.items() if os.path.dirname(p) == directory), None)
    return found or (RECORDED_HERE if entry.startswith("tests/data/traces/recorded/") else "unknown")


def check_gains(findings):
    gain, severity = [], []
    for f in findings:
        if f.get("severity") not in SEVERE:
            continue
        g = f.get("expected_gain") or {}
        if not g.get("range") or not g.get("bounded_by"):
            gain.append(f"{f['verdict']} ({f['severity']}) has no expected gain with a range and what bounds it")
        elif g.get("unit") == "ms" and (g.get("speedup_percent") or 0) < MIN_GAIN_PERCENT:
            severity.append(f"{f['verdict']} is {f['severity']} but promises {g.get('speedup_percent', 0):.1f} %")
    return gain, severity


def device_work_percent(recording, gpu):
    """A trace GPU's share of the steps with device work: kernels, and copies, memsets
    and collectives with no kernel beside them (the step breakdown's device parts; work,
    never idle), or its kernels' share where the breakdown is not its own."""
    average = (recording.get("step_breakdown") or {}).get("average") or {}
    if gpu.get("device") != (recording.get("device") or {}).get("id") or not average.get("total_ms"):
        return gpu["busy_percent"]
    work = sum(average.get(k) or 0 for k in ("kernel_ms", "memcpy_ms", "memset_ms", "device_communication_ms"))
    return 100.0 * work / average["total_ms"]


def busy_percents(report):
    """(label, busy %) of each GPU seen: a trace's device work, a metric log's mean."""
    out = []
    for r in report.get("recordings", []):
        if r.get("format") in ("kineto", "nsys"):
            for g in r.get("gpus") or []:
                if g.get("busy_percent") is not None:
                    out.append((f"{os.path.basename(r.get('source') or '?')} GPU {g.get('device')}",
                                device_work_percent(r, g)))
        for d in r.get("metric_devices") or []:
            busy = d.get("busy_mean_percent")
            if busy is None:
                busy = ((d.get("metrics") or {}).get("gpu_util") or {}).get("mean")
            if busy is not None:
                out.append((d.get("label") or "GPU", busy))
    return out


# Limitations that say why a trace's idle time is not the GPU's and no idle verdict
# is drawn from it: the report explains the idle GPU by what its records miss.
IDLE_NOT_JUDGED = ("the profiler dropped them",)


def check_idle(report, verdicts):
    if verdicts & EXPLAINS_IDLE:
        return []
    said = [t for r in report.get("recordings", []) for t in r.get("limitations") or []]
    if any(reason in t for t in said for reason in IDLE_NOT_JUDGED):
        return []
    return [f"{label} busy {busy:.0f} % with no finding that says why"
            for label, busy in busy_percents(report) if busy < 50.0]


def check_compute_limit(report, findings):
    out = []
    if not any(f["verdict"] == "at_compute_limit" and f.get("origin", "trace") == "trace" for f in findings):
        return out
    for r in report.get("recordings", []):
        device = r.get("device") or {}
        if r.get("format") == "kineto" and device.get("name") and device.get("spec") is None:
            out.append(f"at_compute_limit on {device['name']}, which the spec table does not have")
    return out


def check_warmup(report):
    """Leading steps over 3x the median of five or more (autotuning, allocator growth,
    compilation) are left out of the averages the verdicts use, and only those."""
    out = []
    for r in report.get("recordings", []):
        sb = r.get("step_breakdown") or {}
        totals = [s.get("total_ms") or 0 for s in sb.get("steps", [])]
        expected = 0
        if len(totals) >= 5:
            median = sorted(totals)[len(totals) // 2]
            while expected < len(totals) - 1 and totals[expected] > 3 * median:
                expected += 1
        said = sb.get("warmup_steps", 0)
        if said != expected:
            out.append(f"{os.path.basename(r.get('source', ''))}: {expected} leading step(s) over 3x the median, "
                       f"{said} left out as warm-up")
        elif expected:
            steady = totals[expected:]
            mean = sum(steady) / len(steady)
            if abs((r.get("avg_step_ms") or 0) - mean) > 0.01 * mean + 1e-3:
                out.append(f"{os.path.basename(r.get('source', ''))}: average step {r.get('avg_step_ms')} ms, "
                           f"the steady steps' mean {mean:.3f} ms")
    return out


def check_time_sum(report):
    """The device's time adds up: over the steady steps of a trace with a GPU, kernels,
    copies, memsets, collective kernels (not the host's nccl:* spans) and idle by cause
    make the steps' time, within 1 %."""
    out = []
    for r in report.get("recordings", []):
        sb, idle = r.get("step_breakdown") or {}, r.get("idle") or {}
        steady = (sb.get("steps") or [])[sb.get("warmup_steps", 0):]
        if not steady or not r.get("gpus") or "total_ms" not in idle:
            continue  # no device (a CPU-only trace) or no steps: nothing to add up
        total = sum(s["total_ms"] for s in steady)
        device = sum(s["kernel_ms"] + s["memcpy_ms"] + s["memset_ms"] + s["device_communication_ms"] for s in steady)
        if abs(device + idle["total_ms"] - total) > 0.01 * total:
            out.append(f"{os.path.basename(r.get('source') or '?')}: kernels, copies, memsets and collectives "
                       f"{device:.3f} ms + idle {idle['total_ms']:.3f} ms against the steps' {total:.3f} ms")
    return out


def check_dropped_records(report, verdicts):
    """Kernel launch calls over twice the kernel records (and 100 more) are records the
    profiler dropped: said as a limitation, and never judged idle, underutilized or
    launch-bound; and the limitation only where the counts show it."""
    out = []
    for r in report.get("recordings", []):
        launch = r.get("launch") or {}
        calls, records = launch.get("kernel_launch_calls"), launch.get("kernel_records") or 0
        if calls is not None:
            calls -= launch.get("captured_kernel_launches") or 0  # captured into a graph: no kernel runs
        dropped = calls is not None and records > 0 and calls > 2 * records and calls - records >= 100
        said = any("the profiler dropped them" in text for text in r.get("limitations") or [])
        name = os.path.basename(r.get("source") or "?")
        if dropped and not said:
            out.append(f"{name}: {calls} kernel launch calls, {records} kernel records, no limitation said")
        if said and not dropped:
            out.append(f"{name}: dropped records said with {calls} launch calls and {records} kernel records")
        if dropped and verdicts & {"idle", "underutilized", "launch_bound"}:
            out.append(f"{name}: {calls - records} kernel records dropped, yet judged "
                       f"{', '.join(sorted(verdicts & {'idle', 'underutilized', 'launch_bound'}))}")
    return out


def check_percents(findings):
    out = []
    for f in findings:
        for e in f.get("evidence") or []:
            value = e.get("value")
            if e.get("unit") == "percent" and value is not None and not -0.5 <= value <= 100.5:
                out.append(f"{f['verdict']}: {e.get('name')} = {value:.1f} %")
            if "mfu" in (e.get("name") or "").lower() and value is not None and value > 100.5:
                out.append(f"{f['verdict']}: {e.get('name')} = {value:.1f} (MFU above 100 %)")
    return out


def judge(report):
    findings = report.get("findings", [])
    verdicts = {f["verdict"] for f in findings}
    gain, severity = check_gains(findings)
    return {"data": no_data(report), "gain": gain, "severity_gain": severity,
            "idle_explained": check_idle(report, verdicts), "compute_limit": check_compute_limit(report, findings),
            "percent": check_percents(findings), "warmup": check_warmup(report),
            "time_sum": check_time_sum(report), "dropped_records": check_dropped_records(report, verdicts)}


def run(binary, paths):
    try:
        proc = subprocess.run([binary, "diagnose", *paths, "--json"], capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return None, "took over 600 s"
    # 3: an input gputriage does not read, with the file named (2: a usage error).
    if proc.returncode == 3 and proc.stderr.strip() and any(os.path.basename(p) in proc.stderr for p in paths):
        return None, "rejected: " + proc.stderr.strip().splitlines()[0][:200]
    if proc.returncode not in (0, 1):
        first = (proc.stderr.strip().splitlines() or [""])[0]
        return None, f"exit {proc.returncode}: {first[:200]}"
    try:
        return json.loads(proc.stdout), ""
    except json.JSONDecodeError as e:
        return None, f"no JSON report: {e}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gputriage")
    ap.add_argument("list", nargs="+", help="one or more run lists (committed, public)")
    ap.add_argument("--root", default=os.path.join(HERE, "..", ".."))
    ap.add_argument("--fetched", default=os.environ.get("GPUTRIAGE_CORPUS_CACHE", ""))
    ap.add_argument("--json")
    ap.add_argument("--show", type=int, default=20, help="violations printed per invariant")
    args = ap.parse_args()
    runs = [run for path in args.list for run in read_list(path, args.root, args.fetched)]
    violations = {name: [] for name in INVARIANTS}
    rejected = []
    missing, judged, files, repos = 0, 0, 0, set()
    for where, paths, sources in runs:
        if not all(os.path.exists(p) for p in paths):
            missing += 1
            continue
        judged += 1
        files += len(paths)
        repos.update(sources)
        report, error = run(args.gputriage, paths)
        first = os.path.relpath(paths[0], args.fetched if args.fetched and paths[0].startswith(args.fetched) else args.root)
        label = f"{where} {first}" + (f" and {len(paths) - 1} more" if len(paths) > 1 else "")
        if report is None:
            if not error.startswith("rejected: "):
                violations["exit"].append(f"{label}: {error}")
                continue
            signs = [(p, gpu_data_sign(p)) for p in paths]
            held = [f"{os.path.basename(p)} holds {what}" for p, what in signs if what]
            if held:
                violations["refused_gpu_data"].append(f"{label}: {'; '.join(held)}, refused: {error[len('rejected: '):]}")
            else:
                rejected.append(f"{label}: {error}")
            continue
        for name, found in judge(report).items():
            violations[name] += [f"{label}: {v}" for v in found]
    public = repos - {RECORDED_HERE}
    print(f"sweep: {judged} runs judged ({files} files from {len(public)} public repositories"
          f"{' and recordings made here' if RECORDED_HERE in repos else ''}; {missing} runs listed but not here); "
          f"{len(rejected)} refused with a clear error")
    for r in rejected[:args.show]:
        print(f"    {r}")
    for name in INVARIANTS:
        found = violations[name]
        print(f"{name:15} {len(found):5} violation{'s' if len(found) != 1 else ''}")
        for v in found[:args.show]:
            print(f"    {v}")
        if len(found) > args.show:
            print(f"    ... and {len(found) - args.show} more")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": judged, "files": files, "repositories": sorted(repos), "missing": missing, "rejected": rejected, "violations": violations}, f, indent=1)
    return 1 if any(violations.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
