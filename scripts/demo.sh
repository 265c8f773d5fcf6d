#!/usr/bin/env bash
# Sets up, builds, and diagnoses the bundled real data: ResNet-50 traces on a V100
# (DataLoader num_workers=0, then 4), an nvidia-smi capture of an H100 idle and
# under load, a dcgm-exporter scrape of an A100 with a MIG instance, and a PyTorch
# loop with a slow dataset recorded through zero-code step markers. On a
# machine with an NVIDIA GPU and PyTorch it also records a short training loop
# there (a profiler trace via scripts/record_gpu_trace.py, an nvidia-smi log and,
# on Hopper or newer, GPM metrics through nvidia-smi dmon) and diagnoses them together.
# The traces' (and the GPU run's) HTML reports go to build/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --product  # the build only: the demo needs no test environment
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target gputriage gputriage_python_package
bin=build/release/src/cli/gputriage
reports=build/demo
mkdir -p "$reports"
for f in tests/data/traces/kineto-resnet50-v100/num_workers_0.pt.trace.json.gz \
         tests/data/traces/kineto-resnet50-v100/num_workers_4.pt.trace.json.gz; do
  name=$(basename "$f" .pt.trace.json.gz)
  "$bin" diagnose --kernels 5 "$f" --html "$reports/resnet50_$name.html"
  echo
done
"$bin" diagnose tests/data/metrics/nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt
echo
"$bin" diagnose tests/data/metrics/dcgm-exporter/nvidia_docs_a100_mig_load.prom
echo
"$bin" cost --monthly-spend 40000 --utilization 45
echo
# Zero-code step markers on a real PyTorch loop (CPU) whose dataset waits 0.25 ms per
# sample, read with num_workers=0: data wait against compute, judged from the steps.
python=$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' build/release/CMakeCache.txt)  # the one the package is built for
"$bin" record --python --no-store -- "$python" tests/python/torch_training_loop.py --workers 0 --markers none
if command -v nvidia-smi >/dev/null 2>&1 && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  out=$(mktemp -d)
  nvidia-smi --query-gpu=timestamp,index,uuid,name,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,power.limit,clocks.sm,clocks.max.sm,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 200 >"$out/nvidia-smi.csv" 2>"$out/nvidia-smi.err" &
  smi=$!
  nvidia-smi dmon --gpm-metrics 2,3,5,10,12 -o DT -d 1 >"$out/gpm-dmon.txt" 2>"$out/gpm.err" &
  gpm=$!
  python3 scripts/record_gpu_trace.py "$out/live.json"
  kill "$smi" "$gpm" 2>/dev/null || true
  wait "$smi" "$gpm" 2>/dev/null || true
  inputs=("$out/live.json")
  [ -s "$out/nvidia-smi.csv" ] && inputs+=("$out/nvidia-smi.csv")
  grep -qi "smutil" "$out/gpm-dmon.txt" 2>/dev/null && inputs+=("$out/gpm-dmon.txt")  # GPM needs Hopper+
  "$bin" diagnose "${inputs[@]}" --html "$reports/this_gpu.html"
fi
echo "HTML reports (open in any browser, offline): $(ls "$reports"/*.html | tr '\n' ' ')"
