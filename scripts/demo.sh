#!/usr/bin/env bash
# Sets up, builds, and diagnoses the bundled real traces (ResNet-50 on a V100 with
# DataLoader num_workers=0, then 4). On a machine with an NVIDIA GPU and PyTorch,
# also diagnoses a trace recorded there and then (scripts/record_gpu_trace.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target gputriage
bin=build/release/src/cli/gputriage
for f in tests/data/traces/kineto-resnet50-v100/num_workers_0.pt.trace.json.gz \
         tests/data/traces/kineto-resnet50-v100/num_workers_4.pt.trace.json.gz; do
  "$bin" diagnose --kernels 5 "$f"
  echo
done
if command -v nvidia-smi >/dev/null 2>&1 && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  out=$(mktemp -d)
  python3 scripts/record_gpu_trace.py "$out/live.json"
  "$bin" diagnose "$out/live.json"
fi
