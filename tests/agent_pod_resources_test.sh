#!/usr/bin/env bash
# The agent naming pods from the kubelet's pod-resources socket (a stand-in
# kubelet, tests/fake_kubelet.cc, serving List on a unix socket):
#  - a GPU whose process runs in an allocated pod, and a GPU allocated to a pod
#    that runs nothing on it, carry namespace, pod and container on the DCGM
#    series (dcgm-exporter's labels) and on gputriage's (with job_name);
#  - a GPU moved to another pod is another job: its window starts again;
#  - the kubelet gone: gputriage_pod_resources_up 0 with the reason, the names
#    of its last answer kept; a socket that is not there is named;
#  - promtool check metrics passes on the page.
set -u
bin=$1
fake_nvml=$2
fake_kubelet=$3
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

sleep 600 &
pids+=($!)
job=$!
cat >"$tmp/allocations" <<EOT
team-a trainer-0 main nvidia.com/gpu GPU-p0
team-b held-idle worker nvidia.com/gpu GPU-p1
EOT
"$fake_kubelet" "$tmp/kubelet.sock" "$tmp/allocations" 2>"$tmp/kubelet.err" &
kubelet=$!
pids+=($kubelet)
cat >"$tmp/scenario" <<EOT
device name="NVIDIA H100 80GB HBM3" uuid=GPU-p0 bus=00000000:18:00.0 power_limit_w=700 max_sm_mhz=1980
series gpu_util 90
series power_w 500
process pid=$job sm=90 used_mib=30000
device name="NVIDIA H100 80GB HBM3" uuid=GPU-p1 bus=00000000:19:00.0 power_limit_w=700 max_sm_mhz=1980
series gpu_util 0
series power_w 70
EOT
port=$(free_port)
GPUTRIAGE_FAKE_NVML_SCENARIO=$tmp/scenario "$bin" agent --listen "127.0.0.1:$port" --nvml-library "$fake_nvml" \
  --hostname node-k --interval 0.1 --window 5 --judge-every 0.3 --pod-resources-socket "$tmp/kubelet.sock" \
  --pod-refresh 0.3 2>"$tmp/agent.err" &
pids+=($!)
page() { curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/page.txt"; }
wait_for() {  # PATTERN: until the page has a line matching it
  for _ in $(seq 1 80); do page && grep -q -- "$1" "$tmp/page.txt" && return 0; sleep 0.1; done
  return 1
}
# Names arrive with the first attribution after the kubelet's first answer.
wait_for 'gputriage_finding{.*uuid="GPU-p1".*pod="held-idle".*} 1$' ||
  { echo "FAIL: no named verdicts"; grep -E "finding|pod_resources" "$tmp/page.txt"; cat "$tmp/agent.err"; exit 1; }
grep -q '^gputriage_pod_resources_up{error="",hostname="node-k"} 1$' "$tmp/page.txt" ||
  { echo "FAIL: pod_resources_up"; grep pod_resources "$tmp/page.txt"; fail=1; }
grep -q '^DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-p0",.*,pod="trainer-0",namespace="team-a",container="main"} 90$' "$tmp/page.txt" ||
  { echo "FAIL: DCGM series without the pod labels"; grep DCGM_FI_DEV_GPU_UTIL "$tmp/page.txt"; fail=1; }
grep -q '^gputriage_finding{.*uuid="GPU-p0".*namespace="team-a",pod="trainer-0",container="main",job_name="pod team-a/trainer-0/main".*} 1$' "$tmp/page.txt" ||
  { echo "FAIL: gputriage series without the pod labels"; grep gputriage_finding "$tmp/page.txt"; fail=1; }
# Held and idle: allocated to a pod with nothing of it running on the GPU.
grep -q '^gputriage_finding{.*uuid="GPU-p1".*namespace="team-b",pod="held-idle",container="worker",job_name="pod team-b/held-idle/worker".*verdict="idle".*} 1$' "$tmp/page.txt" ||
  { echo "FAIL: the held, idle GPU is not named"; grep gputriage_finding "$tmp/page.txt"; fail=1; }
[ "$fail" = 0 ] && echo "ok: both GPUs named by pod, namespace and container (one running, one held and idle)"
promtool check metrics <"$tmp/page.txt" >"$tmp/promtool.out" 2>&1
rc=$?
if [ $rc != 0 ] && grep -v -E 'label names should be written in .snake_case. not .camelCase.|^$' "$tmp/promtool.out" | grep -q .; then
  echo "FAIL: promtool check metrics"; cat "$tmp/promtool.out"; fail=1
fi

# The GPU goes to another pod: another job, a new window.
sed -i 's/^team-b held-idle worker/team-c next-job main/' "$tmp/allocations"
wait_for 'gputriage_window_covered_seconds{.*uuid="GPU-p1".*pod="next-job".*}' ||
  { echo "FAIL: the GPU's new pod"; grep 'GPU-p1' "$tmp/page.txt" | head -3; fail=1; }
# No verdict, window or gauge speaks for the old pod; only its goodput-ledger
# counters stay (their final values, served a while so the last scrapes see them).
grep -v '^gputriage_ledger_gpu_seconds_total' "$tmp/page.txt" | grep -q 'pod="held-idle"' &&
  { echo "FAIL: the old pod is still named"; fail=1; }
grep -q '^gputriage_ledger_gpu_seconds_total{.*pod="held-idle".*bucket="unsplit"' "$tmp/page.txt" ||
  { echo "FAIL: the old pod's final ledger is not served"; grep ledger "$tmp/page.txt"; fail=1; }
[ "$fail" = 0 ] && echo "ok: a GPU moved to another pod is another job"

# The kubelet gone: the reason, and the names of its last answer kept.
kill "$kubelet"
wait_for '^gputriage_pod_resources_up{error="[^"]\+",hostname="node-k"} 0$' ||
  { echo "FAIL: the kubelet gone is not a series"; grep pod_resources "$tmp/page.txt"; fail=1; }
grep -q 'pod="trainer-0"' "$tmp/page.txt" || { echo "FAIL: the last answer's names were dropped"; fail=1; }
[ "$fail" = 0 ] && echo "ok: kubelet gone: $(grep '^gputriage_pod_resources_up' "$tmp/page.txt")"

# A socket that is not there.
port2=$(free_port)
GPUTRIAGE_FAKE_NVML_SCENARIO=$tmp/scenario "$bin" agent --listen "127.0.0.1:$port2" --nvml-library "$fake_nvml" \
  --interval 0.1 --pod-resources-socket "$tmp/missing.sock" --pod-refresh 0.2 2>"$tmp/agent2.err" &
pids+=($!)
ok=""
for _ in $(seq 1 50); do
  curl -sf "http://127.0.0.1:$port2/metrics" | grep -q "^gputriage_pod_resources_up{error=\"[^\"]*missing.sock[^\"]*\",hostname=\"[^\"]*\"} 0$" && { ok=1; break; }
  sleep 0.1
done
[ -n "$ok" ] && echo "ok: a missing socket is named" || { echo "FAIL: a missing socket"; curl -s "http://127.0.0.1:$port2/metrics" | grep pod_resources; fail=1; }
[ "$fail" = 0 ] && echo "PASS"
exit "$fail"
