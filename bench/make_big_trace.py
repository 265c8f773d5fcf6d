"""Writes a Kineto trace of about TARGET_BYTES from a real one, for the trace
benchmarks (bench/trace_scale_benchmark.sh).

The source's events are repeated as later steps of the same job: each copy is
shifted by the source's time span, its correlation / external ids by a stride and
its ProfilerStep numbers by 100, so the result is one self-consistent longer run.

--layout kineto (the default) writes what a real long profile looks like: Kineto
writes the host side (operators, annotations) of the whole profile first and the
device side and runtime calls after it, so the host and device events of one step
lie gigabytes apart in a large file. --layout copies writes copy after copy.

Each event is serialised once; copies fill in the shifted numbers (the slow part
of writing gigabytes from Python is json.dumps, done here once per event).
"""
import argparse
import gzip
import json
import re

SLOT = "\u0000slot{}\u0000"
ID_KEYS = ("correlation", "External id", "external id")
DEVICE_SIDE = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "runtime", "memcpy", "memset",
               "cuda_sync", "ac2g", "gpu_user_annotation"}


def number_text(value, template):
    """`value` written with as many decimals as `template` (the original ts) had."""
    text = repr(template)
    if isinstance(template, int) or "." not in text or "e" in text:
        return str(int(round(value))) if isinstance(template, int) else repr(float(value))
    decimals = len(text.split(".")[1])
    return f"{value:.{decimals}f}"


def compile_event(event):
    """(pieces, fillers): the event's JSON split around the values a copy changes."""
    e = dict(event)
    fillers = []
    if isinstance(e.get("ts"), (int, float)):
        ts = e["ts"]
        fillers.append(lambda c, span, stride, ts=ts: number_text(ts + c * span, ts))
        e["ts"] = SLOT.format(len(fillers) - 1)
    args = e.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ID_KEYS:
            if isinstance(args.get(key), int) and args[key] >= 0:
                v = args[key]
                fillers.append(lambda c, span, stride, v=v: str(v + c * stride))
                args[key] = SLOT.format(len(fillers) - 1)
        e["args"] = args
    if isinstance(e.get("id"), int):
        v = e["id"]
        fillers.append(lambda c, span, stride, v=v: str(v + c * stride))
        e["id"] = SLOT.format(len(fillers) - 1)
    name = e.get("name")
    if isinstance(name, str) and re.fullmatch(r"ProfilerStep#\d+", name):
        n = int(name[13:])
        fillers.append(lambda c, span, stride, n=n: f'"ProfilerStep#{n + c * 100}"')
        e["name"] = SLOT.format(len(fillers) - 1)
    text = json.dumps(e)
    # re.split with a group: text, slot number, text, ... in the order of the text.
    parts = re.split(r'"\\u0000slot(\d+)\\u0000"', text)
    pieces = parts[0::2]
    ordered = [fillers[int(i)] for i in parts[1::2]]
    assert len(pieces) == len(fillers) + 1, text
    return pieces, ordered


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source")
    ap.add_argument("target_bytes", type=float)
    ap.add_argument("out")
    ap.add_argument("--layout", choices=("kineto", "copies"), default="kineto")
    a = ap.parse_args()
    opener = gzip.open if a.source.endswith(".gz") else open
    with opener(a.source, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    lo = min(e["ts"] for e in timed)
    hi = max(e["ts"] + e.get("dur", 0) for e in timed)
    span = int(hi - lo) + 1000
    stride = 10_000_000
    compiled = [compile_event(e) for e in events]
    one_copy = sum(len("".join(p)) + 2 for p, _ in compiled)
    copies = max(1, round(a.target_bytes / one_copy))
    if a.layout == "kineto":
        host = [c for c, e in zip(compiled, events) if str(e.get("cat", "")).lower() not in DEVICE_SIDE]
        device = [c for c, e in zip(compiled, events) if str(e.get("cat", "")).lower() in DEVICE_SIDE]
        sections = [host, device]
    else:
        sections = [compiled]
    header = {k: v for k, v in trace.items() if k != "traceEvents"}
    with open(a.out, "w") as out:
        out.write(json.dumps(header)[:-1] + ', "traceEvents": [\n')
        first = True
        for_copies = [(s, c) for s in sections for c in range(copies)] if a.layout == "kineto" else \
                     [(sections[0], c) for c in range(copies)]
        for section, c in for_copies:
            chunk = []
            for pieces, fillers in section:
                parts = [pieces[0]]
                for i, fill in enumerate(fillers):
                    parts.append(fill(c, span, stride))
                    parts.append(pieces[i + 1])
                chunk.append("".join(parts))
            text = ",\n".join(chunk)
            out.write(text if first else ",\n" + text)
            first = False
        out.write("\n]}\n")
    print(f"{a.out}: {copies} copies of {a.source} ({a.layout} layout)")


if __name__ == "__main__":
    main()
