#!/usr/bin/env bash
# Benchmark (not a test): import + full analysis of a >= 1 GB Kineto trace made by
# replicating a shared one, against Python's json.load on the same file, in the
# same run. Prints throughput (MB/s of uncompressed JSON), the speed ratio and
# peak RSS as a share of the file size.
#
#   bash bench/import_benchmark.sh [COPIES] [SOURCE_TRACE]
# COPIES defaults to 32 (~1.1 GB from the 35 MB ResNet-50 trace); CI runs 1 copy
# as a smoke test of the script itself.
set -euo pipefail
cd "$(dirname "$0")/.."
copies=${1:-32}
source_trace=${2:-tests/data/traces/kineto-resnet50-v100/num_workers_0.pt.trace.json.gz}
source bench/common.sh
big=$out/replicated_${copies}.json
if [ ! -s "$big" ]; then
  python3 bench/replicate_trace.py "$source_trace" "$copies" "$big"
fi
size=$(stat -c %s "$big")
echo "file: $big, $(python3 -c "print(round($size/1e6,1))") MB"

measure() {  # command... -> prints "seconds max_rss_kb"
  /usr/bin/time -f "%e %M" -o "$out/time.txt" "$@" >/dev/null
  cat "$out/time.txt"
}
read -r ours_s ours_kb < <(measure "$bin" diagnose --json "$big")
read -r py_s py_kb < <(measure python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$big")
python3 - "$size" "$ours_s" "$ours_kb" "$py_s" "$py_kb" <<'PY'
import sys
size, ours_s, ours_kb, py_s, py_kb = int(sys.argv[1]), *map(float, sys.argv[2:])
mb = size / 1e6
print(f"gputriage diagnose --json : {ours_s:7.2f} s  {mb/ours_s:8.1f} MB/s  peak RSS {ours_kb/1024:8.1f} MiB "
      f"({100*ours_kb*1024/size:.1f}% of file)")
print(f"python3 json.load (baseline): {py_s:7.2f} s  {mb/py_s:8.1f} MB/s  peak RSS {py_kb/1024:8.1f} MiB")
print(f"speed ratio vs json.load: {py_s/ours_s:.1f}x (goal >= 10x); RSS/file: {ours_kb*1024/size:.3f} (goal < 0.25)")
PY
