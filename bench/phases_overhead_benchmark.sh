#!/usr/bin/env bash
# Benchmark (not a test): what zero-code mode's phase hooks cost a training step.
# bench/phases_overhead.py runs a real PyTorch loop (CPU, data in memory) under
# `gputriage record --python` in alternating blocks, hooks on and hooks off, in
# one process (whole runs one after another differ by 10-20 % on these shared
# machines: no 1 % goal can be read from them), for a 3-layer MLP and for a
# model of 130 small modules. Prints each block median and the ratio, on / off.
# Goal: < 1 % of step time with phases on.
#
#   bash bench/phases_overhead_benchmark.sh [BLOCKS] [STEPS_PER_BLOCK]
set -euo pipefail
cd "$(dirname "$0")/.."
blocks=${1:-16}
steps=${2:-20}
dir=build/release
bin=$dir/src/cli/gputriage
[ -x "$bin" ] && [ -d "$dir/python/gputriage" ] ||
  { cmake --preset release >/dev/null && cmake --build --preset release --target gputriage gputriage_python_package; }
python=/usr/bin/python3
"$python" -c "import torch" 2>/dev/null ||
  { echo "phases_overhead_benchmark: $python has no torch (scripts/bootstrap.sh installs python3-torch)"; exit 1; }
echo "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
env -u PYTHONPATH "$bin" record --no-store --python -- "$python" bench/phases_overhead.py "$blocks" "$steps" 2>/dev/null |
  grep -v "^gputriage" | sed -n "/^phases overhead/,/^worst/p"
