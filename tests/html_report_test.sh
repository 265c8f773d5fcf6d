#!/usr/bin/env bash
# The HTML report end to end (ctest html_report_browser): `diagnose --html` on
# the bundled traces and metric logs, `record --html` of a marked training loop
# on the fake NVML, then each file in headless Chromium (tests/browser/report_test.cjs):
# no console error, no request, every verdict card, drawn charts, both themes.
# Screenshots and PDFs stay in ARTIFACTS; readme-report.png there is the README's picture.
#   html_report_test.sh GPUTRIAGE FAKE_NVML MARKER_WRITER DATA_DIR ARTIFACTS
set -u
bin=$1
fake_nvml=$2
marker_writer=$3
data=$4
artifacts=$5
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$artifacts"
mkdir -p "$artifacts"
fail=0

diagnose() {  # NAME ARGS...: the report file, or a failure naming the command
  local name=$1
  shift
  "$bin" diagnose "$@" --html "$artifacts/$name.html" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  if [ $rc -ne 0 ] || [ ! -s "$artifacts/$name.html" ]; then
    echo "FAIL: diagnose $* --html exited $rc"; cat "$tmp/$name.err"; fail=1
  fi
}
diagnose resnet50_num_workers_0 "$data/traces/kineto-resnet50-v100/num_workers_0.pt.trace.json.gz"
diagnose resnet50_num_workers_4 "$data/traces/kineto-resnet50-v100/num_workers_4.pt.trace.json.gz"
diagnose nccl_a100_rank0 "$data/traces/hta/nccl_a100_rank0.json.gz"
diagnose h100_idle_and_load "$data/metrics/nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt" \
  --price-per-gpu-hour 3.5 --monthly-spend 20000
diagnose a100_mig_dcgm_exporter "$data/metrics/dcgm-exporter/nvidia_docs_a100_mig_load.prom" --price-per-gpu-hour 2

# The text report is still printed beside the file, and the JSON beside --json.
grep -q "Input-bound" "$tmp/resnet50_num_workers_0.out" || { echo "FAIL: diagnose --html stopped printing the text report"; fail=1; }

# A live recording: a loop that waits 60 ms for data and computes 30 ms per step,
# on a fake H100 whose utilization and GPM activities follow that rhythm.
cat >"$tmp/scenario" <<'EOT'
device name="NVIDIA H100 80GB HBM3" uuid=GPU-html0 bus=00000000:18:00.0 power_limit_w=700 max_sm_mhz=1980
gpm 1
series gpu_util 2 0 0 0 95 98 5 0 0 0 97 94
series sm_active 1 0 0 0 80 85 3 0 0 0 82 79
series tensor_active 0 0 0 0 45 50 1 0 0 0 48 44
series dram_active 1 0 0 0 30 33 2 0 0 0 31 29
series power_w 90 85 85 85 520 540 120 85 85 85 530 510
EOT
GPUTRIAGE_FAKE_NVML_SCENARIO=$tmp/scenario "$bin" record --nvml-library "$fake_nvml" --no-store --no-mlflow \
  --interval 0.03 --html "$artifacts/record_marked_loop.html" -- "$marker_writer" 40 normal 60 30 \
  >"$tmp/record.out" 2>"$tmp/record.err"
rc=$?
if [ $rc -ne 0 ] || [ ! -s "$artifacts/record_marked_loop.html" ]; then
  echo "FAIL: record --html exited $rc"; cat "$tmp/record.err"; fail=1
fi

# Two DDP ranks as `gputriage export` writes a stored run: rank 1 arrives 30 ms late
# at every step's all-reduce, rank 0 waits for it inside backward. The page shows
# a row per rank (checked in the browser) and the straggler.
/usr/bin/python3 - "$tmp/ddp_ranks.prom" <<'PY'
import sys
ms = 1_000_000
lines = ["# gputriage export of run 1 from test.db: dcgm-exporter text with sample timestamps (ms)"]
start = 1_764_000_000_000 * ms
for k in range(20):
    for rank, pid, data in ((0, 100, 0.5), (1, 101, 30.5)):
        arrival = start + int(data * ms)
        release = start + int(45.7 * ms)
        end = release + 2 * ms
        backward = release - (arrival + 5 * ms)
        phases = [int(data * ms), 5 * ms, backward, 2 * ms, 0, 0, 0]
        lines.append(f"# gputriage_step {k} {pid} {start} {end} 32 0 0 " + " ".join(map(str, phases)) +
                     f" 0 0 0 0 0 0 {arrival} {release}")
    start = end
lines += ["# gputriage_process 100 0 0 2 node-a torch.distributed", "# gputriage_process 101 1 1 2 node-a torch.distributed"]
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
diagnose ddp_ranks "$tmp/ddp_ranks.prom"
grep -q "Straggler: rank 1 (pid 101)" "$tmp/ddp_ranks.out" || { echo "FAIL: the exported ranks name no straggler"; cat "$tmp/ddp_ranks.out"; fail=1; }

# Memory at step ends as an export carries it: GPU 0's allocator leaking 48 MiB a
# step, with the static memory counted. The page draws memory over time and what
# the peak held (checked in the browser).
/usr/bin/python3 - "$tmp/memory_leak.prom" <<'PY'
import sys
ms, mib, gib = 1_000_000, 1 << 20, 1 << 30
lines = ["# gputriage export of run 1 from test.db: dcgm-exporter text with sample timestamps (ms)",
         '# gputriage_setting memory.parameters_bytes "2147483648"', '# gputriage_setting memory.gradients_bytes "2147483648"',
         '# gputriage_setting memory.optimizer_state_bytes "4294967296"', '# gputriage_setting memory.static_device "cuda:0"',
         '# gputriage_setting memory.cuda0.total_bytes "85899345920"']
start = 1_764_000_000_000 * ms
for k in range(80):
    end = start + 50 * ms
    allocated = 12 * gib + k * 48 * mib
    lines.append(f"# gputriage_step {k} 200 {start} {end} 16 0 0 {2 * ms} {20 * ms} {25 * ms} {3 * ms} 0 0 0 0 0 0 0 0 0 0 0 "
                 f"{3 * gib + k * mib} {3 * gib + k * mib} 0 {allocated} {allocated + 6 * gib} {allocated + 8 * gib} 0 0")
    start = end
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
diagnose memory_leak "$tmp/memory_leak.prom"
grep -q "Memory creep on the GPU 0" "$tmp/memory_leak.out" || { echo "FAIL: the exported memory shows no creep"; cat "$tmp/memory_leak.out"; fail=1; }

# A report that cannot be written says where and why, and leaves no temporary file.
"$bin" diagnose "$data/traces/hta/nccl_a100_rank0.json.gz" --html /nonexistent-dir/r.html >/dev/null 2>"$tmp/bad.err"
rc=$?
if [ $rc -eq 0 ] || ! grep -q "/nonexistent-dir/r.html: cannot write" "$tmp/bad.err"; then
  echo "FAIL: an unwritable --html path: exit $rc, $(cat "$tmp/bad.err")"; fail=1
else
  echo "ok: an unwritable --html path is an error naming it"
fi

# File names cannot end the page's script blocks (the '/' in "</script>" makes a directory).
odd="$tmp/odd</script><script>alert(1)<!--"
mkdir -p "$odd"
cp "$data/traces/hta/nccl_a100_rank0.json.gz" "$odd/trace.json.gz"
diagnose odd_file_name "$odd/trace.json.gz"
if grep -q "<script>alert" "$artifacts/odd_file_name.html"; then
  echo "FAIL: a file name broke out of the report's script block"; fail=1
fi

# Kernel names a trace controls (issue 24): one of 5,000 characters with a
# RIGHT-TO-LEFT OVERRIDE in it. The page shows it cut and escaped (checked below).
/usr/bin/python3 - "$tmp/hostile_names.json" <<'PY'
import json, sys
name = "void gemm_kernel<\u202etxet desrever>" + "x" * 5000
events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 900},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
           "args": {"correlation": 1}}]
for i in range(20):
    events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 20 + i * 40, "dur": 30,
                   "args": {"correlation": 1, "device": 0, "stream": 7, "grid": [1, 1, 1], "block": [128, 1, 1]}})
json.dump({"traceEvents": events, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8,
           "computeMinor": 0, "numSms": 108, "totalGlobalMem": 85899345920}]}, open(sys.argv[1], "w"))
PY
diagnose hostile_kernel_names "$tmp/hostile_names.json"
if grep -q "$(printf '\xe2\x80\xae')" "$tmp/hostile_kernel_names.out"; then
  echo "FAIL: a raw RIGHT-TO-LEFT OVERRIDE reached the terminal report"; fail=1
fi

[ $fail -eq 0 ] || exit 1
node "$here/browser/report_test.cjs" "$artifacts" \
  "$artifacts/resnet50_num_workers_0.html=input_bound" \
  "$artifacts/resnet50_num_workers_4.html" \
  "$artifacts/nccl_a100_rank0.html" \
  "$artifacts/h100_idle_and_load.html=idle" \
  "$artifacts/a100_mig_dcgm_exporter.html" \
  "$artifacts/record_marked_loop.html=input_bound" \
  "$artifacts/odd_file_name.html" \
  "$artifacts/ddp_ranks.html=straggler_rank,input_bound" \
  "$artifacts/memory_leak.html=memory_creep" \
  "$artifacts/hostile_kernel_names.html" || exit 1
