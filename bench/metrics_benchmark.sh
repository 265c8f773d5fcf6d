#!/usr/bin/env bash
# Benchmark (not a test): nvidia-smi CSV ingest + full analysis of a >= 1 GB log,
# beside `wc -l` on the same file in the same run (the floor: reading the bytes
# and finding the newlines). Prints MB/s per core (gputriage is single-threaded),
# the ratio to wc -l and peak RSS (memory must stay bounded, not grow with the log).
#
#   bash bench/metrics_benchmark.sh [SIZE_MB]
# SIZE_MB defaults to 1100; CI runs a small size as a smoke test of the script.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mb=${1:-1100}
source bench/common.sh
log=$out/nvidia_smi_${size_mb}MB.csv
[ -s "$log" ] || python3 bench/make_smi_log.py "$log" "$size_mb"
size=$(stat -c %s "$log")

measure() {  # command... -> prints "seconds user_seconds max_rss_kb"
  /usr/bin/time -f "%e %U %M" -o "$out/time.txt" "$@" >/dev/null
  cat "$out/time.txt"
}
cat "$log" >/dev/null  # warm the page cache for both
read -r wc_s wc_user wc_kb < <(measure wc -l "$log")
read -r ours_s ours_user ours_kb < <(measure "$bin" diagnose --json --price-per-gpu-hour 3.9 "$log")
python3 - "$size" "$ours_s" "$ours_user" "$ours_kb" "$wc_s" "$wc_kb" <<'PY'
import sys
size, ours_s, ours_user, ours_kb, wc_s, wc_kb = int(sys.argv[1]), *map(float, sys.argv[2:])
mb = size / 1e6
print(f"file: {mb:.1f} MB")
print(f"gputriage diagnose --json : {ours_s:7.2f} s  {mb/ours_s:8.1f} MB/s per core  peak RSS {ours_kb/1024:7.1f} MiB")
print(f"wc -l (baseline, same file): {wc_s:7.2f} s  {mb/max(wc_s,1e-3):8.1f} MB/s           peak RSS {wc_kb/1024:7.1f} MiB")
print(f"gputriage / wc -l time: {ours_s/max(wc_s,1e-3):.1f}x; throughput goal >= 200 MB/s per core: "
      f"{'met' if mb/ours_s >= 200 else 'NOT met'}; RSS/file {ours_kb*1024/size:.4f}")
PY
