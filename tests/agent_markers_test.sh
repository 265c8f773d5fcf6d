#!/usr/bin/env bash
# The agent reading a job's step markers: a stand-in training loop
# (tests/marker_writer.cc: 30 ms waiting for data, then 10 ms of compute, every
# step) started under `gputriage record`, on GPU 0 of the agent's fake NVML;
# GPU 1 runs a job at the same utilization without markers. The agent reads
# the job's ring through /proc/PID/fd/N as a second reader: GPU 0's window
# holds its steps and its verdict is input_bound (the data wait the markers
# time), as `diagnose` draws it from markers; GPU 1 has no steps series.
set -u
bin=$1
fake_nvml=$2
marker_writer=$3
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  pkill -f "$marker_writer 100000 leak 30 10" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

printf 'device name="NVIDIA H100 80GB HBM3" uuid=GPU-r0 bus=00000000:18:00.0\nseries gpu_util 25\n' >"$tmp/record-gpu"
GPUTRIAGE_FAKE_NVML_SCENARIO=$tmp/record-gpu "$bin" record --nvml-library "$fake_nvml" --no-store --no-mlflow \
  --interval 0.5 -- "$marker_writer" 100000 leak 30 10 >"$tmp/record.out" 2>"$tmp/record.err" &
pids+=($!)
writer=""
for _ in $(seq 1 100); do
  writer=$(pgrep -f "^$marker_writer 100000 leak 30 10" | head -1)
  [ -n "$writer" ] && break
  sleep 0.1
done
[ -n "$writer" ] || { echo "FAIL: the marked job did not start"; cat "$tmp/record.err"; exit 1; }
sleep 600 &
pids+=($!)
unmarked=$!
# A hostile job on GPU 2 names a FIFO without a writer as its ring (issue 53:
# the agent's plain open() of it blocked the sampling thread for ever: no page
# at start-up, /healthz 503 mid-run, and SIGTERM did not end it).
mkfifo "$tmp/ring-fifo"
GPUTRIAGE_MARKERS_PATH=$tmp/ring-fifo sleep 600 &
pids+=($!)
hostile=$!
cat >"$tmp/scenario" <<EOT
device name="NVIDIA H100 80GB HBM3" uuid=GPU-m0 bus=00000000:18:00.0 power_limit_w=700 max_sm_mhz=1980
series gpu_util 25
series power_w 250
process pid=$writer sm=25 used_mib=20000
device name="NVIDIA H100 80GB HBM3" uuid=GPU-m1 bus=00000000:19:00.0 power_limit_w=700 max_sm_mhz=1980
series gpu_util 25
series power_w 250
process pid=$unmarked sm=25 used_mib=20000
device name="NVIDIA H100 80GB HBM3" uuid=GPU-m2 bus=00000000:1a:00.0 power_limit_w=700 max_sm_mhz=1980
series gpu_util 25
series power_w 250
process pid=$hostile sm=25 used_mib=20000
EOT
port=$(free_port)
GPUTRIAGE_FAKE_NVML_SCENARIO=$tmp/scenario "$bin" agent --listen "127.0.0.1:$port" --nvml-library "$fake_nvml" \
  --interval 0.1 --window 4 --judge-every 0.3 2>"$tmp/agent.err" &
agent=$!
pids+=($agent)
ok=""
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/page.txt"
  grep -q '^gputriage_finding{.*uuid="GPU-m0".*verdict="input_bound".*} 1$' "$tmp/page.txt" &&
    grep -q '^gputriage_window_steps{.*uuid="GPU-m0".*} [1-9][0-9]' "$tmp/page.txt" && { ok=1; break; }
  sleep 0.1
done
if [ -n "$ok" ]; then
  echo "ok: the marked job: $(grep '^gputriage_window_steps' "$tmp/page.txt" | sed 's/{.*}//'), verdict input_bound"
else
  echo "FAIL: the marked job's steps or verdict"; grep -E "window_steps|gputriage_finding" "$tmp/page.txt"; cat "$tmp/agent.err"; fail=1
fi
grep -q 'gputriage_window_steps{.*uuid="GPU-m1"' "$tmp/page.txt" && { echo "FAIL: steps for the unmarked job"; fail=1; }
# The job's GPU allocator leaks 32 MiB a step (its markers say so, as a C++ job's
# would): the growth rate over the window, at 10-30 steps a second.
growth=$(grep '^gputriage_job_memory_growth_bytes_per_hour{.*uuid="GPU-m0".*memory="gpu"' "$tmp/page.txt" | awk '{print $NF}')
if [ -n "$growth" ] && /usr/bin/python3 -c "import sys; r = float(sys.argv[1]) / (32 << 20) / 3600; sys.exit(0 if 10 <= r <= 30 else 1)" "$growth"; then
  echo "ok: the job's memory grows $growth bytes an hour (32 MiB a step)"
else
  echo "FAIL: the job's memory growth rate: '$growth'"; grep "memory_growth" "$tmp/page.txt"; fail=1
fi
grep -q 'gputriage_job_memory_growth_bytes_per_hour{.*uuid="GPU-m1"' "$tmp/page.txt" && { echo "FAIL: memory growth for the unmarked job"; fail=1; }
grep '^gputriage_finding{.*uuid="GPU-m1"' "$tmp/page.txt" | grep -q 'verdict="input_bound"' &&
  { echo "FAIL: the unmarked job at the same utilization is input_bound too: the markers made no difference"; fail=1; }
[ "$fail" = 0 ] && echo "ok: the unmarked job at the same utilization: $(grep '^gputriage_finding{.*uuid="GPU-m1"' "$tmp/page.txt" | grep -o 'verdict="[a-z_]*"')"
# The FIFO job's GPU is sampled like any other, and the agent stays healthy
# and ends on SIGTERM.
if grep -q '^gputriage_gpu_utilization_percent{.*uuid="GPU-m2".*} 25$' "$tmp/page.txt" &&
  curl -sf "http://127.0.0.1:$port/healthz" >/dev/null; then
  echo "ok: the job naming a FIFO as its ring: its GPU sampled, /healthz 200"
else
  echo "FAIL: the job naming a FIFO as its ring"; grep 'GPU-m2' "$tmp/page.txt" | head -3; fail=1
fi
kill -TERM "$agent"
for _ in $(seq 1 50); do kill -0 "$agent" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$agent" 2>/dev/null; then
  echo "FAIL: SIGTERM did not end the agent in 5 s"; fail=1
else
  wait "$agent"; rc=$?
  [ "$rc" = 0 ] && echo "ok: SIGTERM ended the agent (exit 0)" || { echo "FAIL: the agent exited $rc on SIGTERM"; fail=1; }
fi
[ "$fail" = 0 ] && echo "PASS"
exit "$fail"
