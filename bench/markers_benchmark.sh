#!/usr/bin/env bash
# Benchmark (not a test): the cost of a step marker written into a real ring.
#  - C/C++ (bench/markers_benchmark.cc, Google Benchmark, with a ring of its own):
#    ns per marker, against the clock read alone and the no-recorder path, same
#    run. Goal <= 30 ns.
#  - Python (bench/python_markers_benchmark.py): ns per marked step (two markers)
#    against a time.perf_counter() pair plus a list append, same run. Goal <= 1.5x.
#
#   bash bench/markers_benchmark.sh [PYTHON_STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-200000}
dir=build/release
[ -x "$dir/bench/markers_benchmark" ] && [ -x "$dir/src/cli/gputriage" ] && [ -d "$dir/python/gputriage" ] ||
  { cmake --preset release >/dev/null && cmake --build --preset release --target markers_benchmark gputriage gputriage_python_package; }
python=$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' "$dir/CMakeCache.txt")
echo "== C/C++ markers (the benchmark attaches its own ring)"
"$dir/bench/markers_benchmark" --benchmark_min_time=0.2 2>&1 | grep -E "^(BM_|Benchmark|---)"
echo "== Python markers ($python)"
PYTHONPATH=$dir/python "$dir/src/cli/gputriage" record --no-store -- "$python" bench/python_markers_benchmark.py "$steps" 2>/dev/null
