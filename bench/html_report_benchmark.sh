#!/usr/bin/env bash
# Benchmark (not a test): the HTML report of a 10^6-sample recording. An
# nvidia-smi log of ROWS samples (GPU-rows) on 8 GPUs and on 1 GPU (the long
# single-GPU run stresses the per-pixel downsampling), each reported with
# `diagnose --html`. Printed beside baselines measured in the same run:
#   - file size against the JSON report of the same log;
#   - the time `diagnose --html` takes against `diagnose --json`;
#   - time to first render in headless Chromium against the report of the bundled
#     7-sample H100 capture (the page's fixed cost: uPlot, layout, fonts).
#
#   bash bench/html_report_benchmark.sh [ROWS] [RUNS]
# ROWS defaults to 1000000; CI runs a small size as a smoke test of the script.
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-1000000}
runs=${2:-5}
source bench/common.sh
small=tests/data/metrics/nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt
"$bin" diagnose "$small" --html "$out/html_baseline.html" >/dev/null
measure() {  # command... -> prints "seconds max_rss_kb"
  /usr/bin/time -f "%e %M" -o "$out/time.txt" "$@" >/dev/null
  cat "$out/time.txt"
}
files=("$out/html_baseline.html")
lines=()
for gpus in 8 1; do
  log=$out/html_smi_${rows}_${gpus}gpu.csv
  # About 150 bytes a row in this log's default (units-in-values) CSV.
  [ -s "$log" ] || python3 bench/make_smi_log.py "$log" "$(python3 -c "print($rows * 150.5 / 1e6)")" "$gpus" >/dev/null
  read -r json_s json_kb < <(measure "$bin" diagnose --json "$log")
  "$bin" diagnose --json "$log" >"$out/html_${gpus}gpu.json"
  read -r html_s html_kb < <(measure "$bin" diagnose "$log" --html "$out/html_${gpus}gpu.html")
  samples=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sum(r['metric_rows'] for r in d['recordings']))" "$out/html_${gpus}gpu.json")
  files+=("$out/html_${gpus}gpu.html")
  lines+=("$gpus $samples $(stat -c %s "$out/html_${gpus}gpu.html") $(stat -c %s "$out/html_${gpus}gpu.json") $json_s $html_s $json_kb $html_kb")
done
node bench/html_render_time.cjs "$runs" "${files[@]}" >"$out/html_render.json"
python3 - "$out/html_render.json" "$(stat -c %s "$out/html_baseline.html")" "${files[@]}" -- "${lines[@]}" <<'PY'
import json, sys
args = sys.argv[1:]
render = json.load(open(args[0]))
baseline_size = int(args[1])
sep = args.index("--")
files, lines = args[2:sep], args[sep + 1:]
base = render[files[0]]
print(f"baseline: the bundled 7-sample H100 capture: {baseline_size/1e3:.0f} kB, rendered in {base['rendered_ms']:.0f} ms "
      f"(first contentful paint {base['fcp_ms'] or float('nan'):.0f} ms)")
for f, line in zip(files[1:], lines):
    gpus, samples, html_b, json_b, json_s, html_s, json_kb, html_kb = line.split()
    r = render[f]
    print(f"{gpus} GPU(s), {int(samples):,} samples: HTML {int(html_b)/1e3:.0f} kB ({int(html_b)/int(json_b):.2f}x the JSON report's "
          f"{int(json_b)/1e3:.0f} kB); diagnose --html {float(html_s):.2f} s vs --json {float(json_s):.2f} s "
          f"({float(html_s)/max(float(json_s),1e-3):.2f}x), peak RSS {int(html_kb)/1024:.0f} vs {int(json_kb)/1024:.0f} MiB; "
          f"first render {r['rendered_ms']:.0f} ms ({r['rendered_ms']/base['rendered_ms']:.2f}x the baseline), "
          f"first contentful paint {r['fcp_ms'] or float('nan'):.0f} ms")
PY
