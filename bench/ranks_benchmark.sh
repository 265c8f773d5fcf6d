#!/usr/bin/env bash
# Benchmark (not a test): a run of RANKS rank traces of SIZE_MB each (made from a
# bundled real trace by bench/make_big_trace.py, one file per rank) diagnosed as
# one directory, beside the sum of diagnosing each file alone, in the same run:
# both with the default threads, and each file alone on one thread (--threads -1,
# what "one rank's time" is on one core). Prints wall times, the ratios and peak RSS.
#
#   bash bench/ranks_benchmark.sh [RANKS] [SIZE_MB]      (default: 32 100)
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${1:-32}
size_mb=${2:-100}
source bench/common.sh
dir=$out/ranks_${ranks}x${size_mb}MB
one=$out/rank_${size_mb}MB.json
[ -s "$one" ] || /usr/bin/python3 bench/make_big_trace.py \
  tests/data/traces/kineto-resnet50-v100/num_workers_0.pt.trace.json.gz "${size_mb}e6" "$one" >/dev/null
mkdir -p "$dir"
for ((r = 0; r < ranks; r++)); do
  [ -s "$dir/rank-$r.pt.trace.json" ] ||
    sed "1s/^{/{\"distributedInfo\": {\"rank\": $r, \"world_size\": $ranks, \"backend\": \"nccl\"}, /" "$one" >"$dir/rank-$r.pt.trace.json"
done
cat "$dir"/* >/dev/null  # in the page cache for every reader alike
seconds() { /usr/bin/time -f "%e %M" -o "$out/time.txt" "$@" >/dev/null; cat "$out/time.txt"; }
sum_default=0 sum_one=0
for ((r = 0; r < ranks; r++)); do
  read -r t _ < <(seconds "$bin" diagnose --json "$dir/rank-$r.pt.trace.json")
  read -r t1 _ < <(seconds "$bin" diagnose --json --threads -1 "$dir/rank-$r.pt.trace.json")
  sum_default=$(/usr/bin/python3 -c "print($sum_default + $t)")
  sum_one=$(/usr/bin/python3 -c "print($sum_one + $t1)")
done
read -r together rss < <(seconds "$bin" diagnose --json "$dir")
/usr/bin/python3 - "$ranks" "$size_mb" "$together" "$rss" "$sum_default" "$sum_one" <<'PY'
import sys
ranks, size_mb = int(sys.argv[1]), int(sys.argv[2])
together, rss, sum_default, sum_one = float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
print(f"{ranks} ranks x {size_mb} MB as one directory: {together:.2f} s, peak RSS {rss / 1024:.0f} MiB")
print(f"  each file alone, default threads: {sum_default:.2f} s in all -> the directory takes {together / sum_default:.2f}x (goal <= 0.65)")
print(f"  each file alone, one thread:      {sum_one:.2f} s in all -> the directory takes {together / sum_one:.2f}x")
PY
