#!/usr/bin/env bash
# Benchmark (not a test): gputriage on large Nsight Systems exports, side by side
# in one run with what a reader of the same file can do without it:
#   - Python's sqlite3 (the standard library's, as nsys recipes and nsys-ai read
#     exports) walking the rows gputriage reads: kernels, copies, memsets,
#     synchronizations, CUDA API calls with their names, NVTX ranges. It keeps
#     nothing and judges nothing: the floor of reading the file row by row.
# Exports are grown from a bundled real one (bench/make_big_nsys_export.py: its
# GPU work copied after itself, in time and correlation id). Prints wall time
# and peak RSS of each, and checks that the diagnosis is the same whether the
# events stay in memory or go through scratch files (--memory-budget 4).
#
#   bash bench/nsys_scale_benchmark.sh [SIZE_GB ...]     (default: 0.1 1)
# REPEATS (default 3) runs each command that many times and keeps the median.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(0.1 1)
source bench/common.sh
source_export=tests/data/traces/nsys/a100_cloverleaf_nsys2024.5.1.sqlite
results=$out/nsys_scale_results.tsv
measure_stdout=$out/stdout.txt  # the diagnoses are compared
: >"$results"


for size in "${sizes[@]}"; do
  export_file=$out/nsys_${size}GB.sqlite
  if [ ! -s "$export_file" ]; then
    /usr/bin/python3 bench/make_big_nsys_export.py "$source_export" "$(/usr/bin/python3 -c "print($size * 1e9)")" \
      "$export_file" >/dev/null
  fi
  echo "export of $size GB: $export_file ($(stat -c %s "$export_file") bytes)"
  cat "$export_file" >/dev/null  # in the page cache for every reader alike
  measure python_sqlite3_rows "$size" "$export_file" /usr/bin/python3 bench/sqlite_row_walk.py "$export_file"
  measure gputriage "$size" "$export_file" "$bin" diagnose --json "$export_file"
  cp "$out/stdout.txt" "$out/nsys_${size}_default.json"
  measure gputriage_budget_4mib "$size" "$export_file" "$bin" diagnose --json --memory-budget 4 "$export_file"
  cmp -s "$out/stdout.txt" "$out/nsys_${size}_default.json" ||
    { echo "FAILED: --memory-budget 4 gives another diagnosis than the default budget for $export_file"; exit 1; }
  echo "  the same diagnosis in memory and through scratch files"
done

/usr/bin/python3 - "$results" <<'PY'
import sys; sys.path.insert(0, "bench"); import scale_results  # noqa: E702
rows = scale_results.report(sys.argv[1])
for size, r in rows.items():
    g, py = r["gputriage"], r["python_sqlite3_rows"]
    print(f"{size} GB: gputriage (read + diagnosis) {g[1] / py[1]:.2f}x the time of Python's sqlite3 walking the same "
          f"rows; peak RSS {g[2] / 1024:.0f} MiB ({100 * g[2] * 1024 / g[0]:.1f}% of the file)")
scale_results.print_rss_ratio(rows)
PY
