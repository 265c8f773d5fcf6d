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
# Whole loop iterations (a data wait and a step each), per item of a 1,000-item loader.
ITEMS = 1000
loops = {
    "naive loop: 3 perf_counter() + 2 appends per item": (
        "it = iter(items)\nfor _ in range(1000):\n    t0 = pc(); b = next(it); t1 = pc()\n    t2 = pc(); "
        "waits.append(t1 - t0); steps.append(t2 - t1)",
        "from time import perf_counter as pc; items = list(range(1000)); waits = []; steps = []"),
    "for b in gputriage.watch(items): (4 markers per item)": (
        "for b in watch(items): pass",
        "from gputriage import watch; items = list(range(1000))"),
}

# Repeats interleave the forms, so a noisy moment costs every form one repeat;
# the best repeat of each is kept.
timers = {name: (timeit.Timer(stmt, setup), N) for name, (stmt, setup) in forms.items()}
timers.update({name: (timeit.Timer(stmt, setup), max(1, N // ITEMS)) for name, (stmt, setup) in loops.items()})
best = {name: float("inf") for name in timers}
for _ in range(REPEATS):
    for name, (timer, number) in timers.items():
        best[name] = min(best[name], timer.timeit(number=number) / number)
results = {name: seconds / (ITEMS if name in loops else 1) * 1e9 for name, seconds in best.items()}
baseline = results["naive: perf_counter() pair + list.append"]
print(f"python {sys.version.split()[0]}, {N} steps x {REPEATS} repeats, best repeat; ns per step (two markers)")
for name, ns in results.items():
    if name in loops:
        continue
    print(f"  {name:48s} {ns:7.1f} ns   {ns / baseline:5.2f}x naive")
print("per loop item (a data wait and a step):")
naive_loop = results["naive loop: 3 perf_counter() + 2 appends per item"]
for name in loops:
    print(f"  {name:52s} {results[name]:7.1f} ns   {results[name] / naive_loop:5.2f}x naive loop")
worst = max(results["step_begin(i); step_end(i, samples)"], results["with gputriage.step(samples=32):"])
print(f"worst marked form / naive = {worst / baseline:.2f} (goal <= 1.5)")
