"""Cost of a step marked from Python against the naive way of timing one.

Run under the recorder, so that markers are really written:
    gputriage record --no-store -- python3 bench/python_markers_benchmark.py [N]
(bench/python_markers_benchmark.sh does this). Each form times one step, i.e.
two markers; the baseline, measured in the same run, is what a hand-rolled loop
does: a time.perf_counter() pair and a list append. Goal: <= 1.5x.
"""
import sys
import timeit

import gputriage

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
REPEATS = 7

if not gputriage.enabled():
    sys.exit("python_markers_benchmark: no recorder attached (run it under `gputriage record --`)")

forms = {
    "naive: perf_counter() pair + list.append": (
        "t0 = pc(); t1 = pc(); times.append(t1 - t0)",
        "from time import perf_counter as pc; times = []"),
    "step_begin(i); step_end(i, samples)": (
        "step_begin(7); step_end(7, 32)",
        "from gputriage import step_begin, step_end"),
    "with gputriage.step(samples=32):": (
        "with step(samples=32): pass",
        "from gputriage import step"),
    "with gputriage.phase('forward'):": (
        "with phase('forward'): pass",
        "from gputriage import phase"),
    "empty loop (timeit overhead, not subtracted)": ("pass", ""),
}

results = {}
for name, (stmt, setup) in forms.items():
    best = min(timeit.repeat(stmt, setup, number=N, repeat=REPEATS))
    results[name] = best / N * 1e9
baseline = results["naive: perf_counter() pair + list.append"]
print(f"python {sys.version.split()[0]}, {N} steps x {REPEATS} repeats, best repeat; ns per step (two markers)")
for name, ns in results.items():
    print(f"  {name:48s} {ns:7.1f} ns   {ns / baseline:5.2f}x naive")
worst = max(results["step_begin(i); step_end(i, samples)"], results["with gputriage.step(samples=32):"])
print(f"worst marked form / naive = {worst / baseline:.2f} (goal <= 1.5)")
