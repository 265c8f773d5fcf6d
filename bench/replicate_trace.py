"""Writes COPIES back-to-back copies of a Kineto trace's events into one trace.

Each copy is shifted by the original trace's time span (and correlation/external
ids by a stride), so the result is a longer, self-consistent run of the same job.
"""
import gzip
import json
import sys


def main(src: str, copies: int, dst: str) -> None:
    opener = gzip.open if src.endswith(".gz") else open
    with opener(src, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    lo = min(e["ts"] for e in timed)
    hi = max(e["ts"] + e.get("dur", 0) for e in timed)
    span = int(hi - lo) + 1000
    stride = 10_000_000
    header = {k: v for k, v in trace.items() if k != "traceEvents"}
    with open(dst, "w") as out:
        out.write(json.dumps(header)[:-1] + ', "traceEvents": [\n')
        first = True
        for c in range(copies):
            for e in events:
                e2 = dict(e)
                if isinstance(e2.get("ts"), (int, float)):
                    e2["ts"] = e2["ts"] + c * span
                args = e2.get("args")
                if isinstance(args, dict) and c:
                    args = dict(args)
                    for key in ("correlation", "External id", "external id"):
                        if isinstance(args.get(key), int):
                            args[key] += c * stride
                    e2["args"] = args
                if isinstance(e2.get("id"), int) and c:
                    e2["id"] += c * stride
                if isinstance(e2.get("name"), str) and e2["name"].startswith("ProfilerStep#") and c:
                    e2["name"] = "ProfilerStep#%d" % (int(e2["name"][13:]) + c * 100)
                out.write(("" if first else ",\n") + json.dumps(e2))
                first = False
        out.write("\n]}\n")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
