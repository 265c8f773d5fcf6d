#!/usr/bin/env bash
# Benchmark (not a test): gputriage on large Kineto traces, side by side in one run
# with what a reader of the same files can do without it:
#   - a bare single-core simdjson scan (bench/bare_scan.cc: load, walk traceEvents,
#     read each event's cat and dur), the anchor for plain files;
#   - gzip -dc and ISA-L's igzip -dc (the anchor for .gz), zstd -dc;
#   - Python's json.load and HTA (HolisticTraceAnalysis, pinned in the test
#     environment: parse + temporal breakdown), on the smallest size only, under
#     1 GB (they hold several times the file in memory: json.load took 20 GiB
#     and 204 s for the 5 GB trace).
# Traces are made from a bundled real trace (bench/make_big_trace.py, Kineto's
# layout: the host side of the whole profile first, then the device side).
# Prints wall time and peak RSS of each, the ratios the README quotes, and checks
# that plain, .gz, .zst and one-thread reading give the same diagnosis.
#
#   bash bench/trace_scale_benchmark.sh [SIZE_GB ...]     (default: 0.4 1.4 5)
# REPEATS (default 3) runs each command that many times and keeps the median.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(0.4 1.4 5)
source bench/common.sh
scan=build/release/bench/bare_scan
[ -x "$scan" ] || cmake --build --preset release --target bare_scan >/dev/null
source_trace=tests/data/traces/kineto-resnet50-v100/num_workers_0.pt.trace.json.gz
venv_python=.venv/bin/python
results=$out/trace_scale_results.tsv
: >"$results"


diagnosis_of() {  # file [args] -> the JSON report with the file's name taken out
  "$bin" diagnose --json "$@" | sed "s|$(basename "$1")|TRACE|g" | md5sum | cut -d' ' -f1
}

smallest=${sizes[0]}
for size in "${sizes[@]}"; do
  trace=$out/trace_${size}GB.json
  if [ ! -s "$trace" ]; then
    /usr/bin/python3 bench/make_big_trace.py "$source_trace" "$(/usr/bin/python3 -c "print($size * 1e9)")" "$trace" >/dev/null
  fi
  [ -s "$trace.gz" ] || igzip -3 -c "$trace" >"$trace.gz"
  [ -s "$trace.zst" ] || zstd -q -3 -T0 -f "$trace" -o "$trace.zst"
  echo "trace of $size GB: $trace ($(stat -c %s "$trace") bytes; .gz $(stat -c %s "$trace.gz"), .zst $(stat -c %s "$trace.zst"))"
  cat "$trace" >/dev/null  # in the page cache for every reader alike
  # simdjson reads one document of at most 4 GiB (32-bit offsets): beyond that
  # the bare scan cannot run at all, and the plain ratio is not printed.
  if [ "$(stat -c %s "$trace")" -lt 4294967000 ]; then
    measure bare_scan "$size" "$trace" "$scan" "$trace"
  else
    echo "  bare_scan: not possible (simdjson parses documents up to 4 GiB)"
  fi
  measure gputriage "$size" "$trace" "$bin" diagnose --json "$trace"
  measure gputriage_one_thread "$size" "$trace" "$bin" diagnose --json --threads -1 "$trace"
  measure gzip_dc "$size" "$trace" gzip -dc "$trace.gz"
  measure igzip_dc "$size" "$trace" igzip -dc "$trace.gz"
  measure gputriage_gz "$size" "$trace" "$bin" diagnose --json "$trace.gz"
  measure zstd_dc "$size" "$trace" zstd -dc "$trace.zst"
  measure gputriage_zst "$size" "$trace" "$bin" diagnose --json "$trace.zst"
  # json.load and HTA hold 4x-10x the file in memory: on the smallest size only,
  # and only when it is under 1 GB.
  if [ "$size" = "$smallest" ] && [ "$(stat -c %s "$trace")" -lt 1000000000 ]; then
    measure python_json_load "$size" "$trace" /usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$trace"
    if "$venv_python" -c 'import hta' 2>/dev/null; then
      hta_dir=$out/hta_$size
      mkdir -p "$hta_dir"
      ln -sf "$(realpath "$trace")" "$hta_dir/rank0.json"
      measure hta "$size" "$trace" "$venv_python" -c '
import sys
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)' "$hta_dir"
    else
      echo "  hta: not installed (scripts/bootstrap.sh installs it in .venv)"
    fi
  fi
  plain=$(diagnosis_of "$trace")
  for variant in "$trace --threads -1" "$trace.gz" "$trace.zst"; do
    # shellcheck disable=SC2086
    [ "$(diagnosis_of $variant)" = "$plain" ] || { echo "FAILED: $variant gives another diagnosis than $trace"; exit 1; }
  done
  echo "  the same diagnosis from plain, one-thread, .gz and .zst reading"
done

/usr/bin/python3 - "$results" <<'PY'
import sys; sys.path.insert(0, "bench"); import scale_results  # noqa: E702
rows = scale_results.report(sys.argv[1])
for size, r in rows.items():
    g, gz, gzip = r["gputriage"], r["gputriage_gz"], r["gzip_dc"]
    scan = r.get("bare_scan")
    line = (f"{size} GB: plain " + (f"{scan[1] / g[1]:.2f}x the bare scan (goal >= 1.5); " if scan else
                                    "(no bare scan: over simdjson's 4 GiB); ") +
            f".gz {gzip[1] / gz[1]:.2f}x gzip -dc (goal >= 2.5); "
            f"one thread -> default {r['gputriage_one_thread'][1] / g[1]:.2f}x; "
            f"peak RSS {g[2] / 1024:.0f} MiB ({100 * g[2] * 1024 / g[0]:.1f}% of the file)")
    if "python_json_load" in r: line += f"; json.load {r['python_json_load'][1] / g[1]:.1f}x slower"
    if "hta" in r: line += f"; HTA {r['hta'][1] / g[1]:.1f}x slower, {r['hta'][2] / max(g[2], 1):.1f}x the RSS"
    print(line)
scale_results.print_rss_ratio(rows)
PY
