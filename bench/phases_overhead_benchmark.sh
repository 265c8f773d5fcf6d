#!/usr/bin/env bash
# Benchmark (not a test): what zero-code mode's phase hooks cost a training loop.
# The same real PyTorch loop (tests/python/phases_loop.py, CPU, data in memory)
# runs plain (no gputriage at all) and under `gputriage record --python` (steps,
# data, forward, backward and optimizer phases marked), interleaved, in one run;
# each run's own timer around its loop gives the time per step. Two models:
#   typical: a 3-layer MLP, ~20 ms steps, 6 module calls per forward;
#   many small modules: 64 hidden blocks of 64 units, every module call hooked
#   (the hook wraps nn.Module.__call__: inner calls pay one Python frame each).
# Goal: < 1 % of step time with phases on.
#
#   bash bench/phases_overhead_benchmark.sh [REPEATS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-5}
steps=${2:-150}
dir=build/release
bin=$dir/src/cli/gputriage
[ -x "$bin" ] && [ -d "$dir/python/gputriage" ] ||
  { cmake --preset release >/dev/null && cmake --build --preset release --target gputriage gputriage_python_package; }
python=/usr/bin/python3
"$python" -c "import torch" 2>/dev/null || { echo "phases_overhead_benchmark: $python has no torch (scripts/bootstrap.sh installs python3-torch)"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

per_step_ms() {  # timings.json steps -> ms per step of the loop
  "$python" -c "import json,sys; print(json.load(open(sys.argv[1]))['loop_s'] * 1e3 / int(sys.argv[2]))" "$1" "$2"
}

echo "phases overhead: $repeats interleaved repeats of $steps steps each; $(nproc) CPUs, $("$python" -c 'import torch; print("torch", torch.__version__)')"
for config in "typical:--hidden 256 --batch 64" "many-small-modules:--hidden 64 --batch 16 --depth 64"; do
  name=${config%%:*}
  args=${config#*:}
  : >"$out/plain.txt"
  : >"$out/phases.txt"
  for ((i = 0; i < repeats; i++)); do
    # shellcheck disable=SC2086
    env -u PYTHONPATH "$python" tests/python/phases_loop.py --timings "$out/t.json" --steps "$steps" $args
    per_step_ms "$out/t.json" "$steps" >>"$out/plain.txt"
    # shellcheck disable=SC2086
    env -u PYTHONPATH "$bin" record --no-store --python --json "$out/r.json" -- \
      "$python" tests/python/phases_loop.py --timings "$out/t.json" --steps "$steps" $args >/dev/null 2>&1
    per_step_ms "$out/t.json" "$steps" >>"$out/phases.txt"
    "$python" -c "
import json, sys
m = json.load(open(sys.argv[1]))['recordings'][0]['step_markers']
assert m and m['phases_traced'], 'the phases were not recorded'" "$out/r.json"
  done
  "$python" - "$name" "$out/plain.txt" "$out/phases.txt" <<'PY'
import statistics, sys
name, plain, phases = sys.argv[1], [float(x) for x in open(sys.argv[2])], [float(x) for x in open(sys.argv[3])]
def show(label, xs):
    return f"{label} median {statistics.median(xs):.3f} ms/step (best {min(xs):.3f}, worst {max(xs):.3f})"
print(f"  {name}: {show('plain', plain)}; {show('record --python', phases)}")
print(f"  {name}: phases on / plain = {statistics.median(phases) / statistics.median(plain):.4f} (medians), "
      f"{min(phases) / min(plain):.4f} (best runs); goal < 1.01")
PY
done
