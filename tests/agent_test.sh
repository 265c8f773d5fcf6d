#!/usr/bin/env bash
# `gputriage agent` end to end, against the fake NVML: three GPUs (a stop-and-go
# job, a healthy bf16 job, an idle GPU) behind one agent on a free loopback
# port. Checks:
#  - /metrics passes `promtool check metrics` (Debian's prometheus), in the text
#    format and, asked for, OpenMetrics (ending in "# EOF");
#  - DCGM's names and labels carry the latest values; each GPU's verdict,
#    window utilization and idle dollars are as the scenario's own arithmetic says;
#  - faults are series, not exits: a GPU that falls off the bus is
#    gputriage_gpu_lost with its verdict gone; the job on a GPU exiting starts
#    its window again (no stale verdict); NVML failing to load is
#    gputriage_nvml_up 0 with the reason, and /healthz stays 200;
#  - SIGTERM ends the agent with exit 0.
set -u
bin=$1
fake_nvml=$2
tmp=$(mktemp -d)
agent_pid=""
job_pid=""
cleanup() {
  [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null
  [ -n "$job_pid" ] && kill "$job_pid" 2>/dev/null
  [ -n "${healthy_pid:-}" ] && kill "$healthy_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
fail=0
command -v promtool >/dev/null || { echo "FAIL: promtool not installed (apt install prometheus)"; exit 1; }
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Two processes stand in for the jobs: their pids are on the fake GPUs.
sleep 600 &
job_pid=$!
# The second names itself with bytes that are not UTF-8 (any user can: prctl
# PR_SET_NAME); its job_name label must still be valid UTF-8 (issue 53: one
# such name made Prometheus drop the node's whole scrape).
/usr/bin/python3 -c 'import ctypes, time; ctypes.CDLL(None).prctl(15, b"train\xff\xfe", 0, 0, 0); time.sleep(600)' &
healthy_pid=$!
cat >"$tmp/scenario" <<EOT
device name="NVIDIA H100 80GB HBM3" uuid=GPU-stopgo bus=00000000:18:00.0 power_limit_w=700 max_sm_mhz=1980
series gpu_util 95 95 0 0 0 0
series power_w 500 500 120 120 120 120
series sm_mhz 1980
series mem_used_mib 40000
process pid=$job_pid sm=40 used_mib=39000
device name="NVIDIA H100 80GB HBM3" uuid=GPU-healthy bus=00000000:19:00.0 power_limit_w=700 max_sm_mhz=1980 gpm=1
series gpu_util 99
series power_w 650
series sm_mhz 1980
series sm_active 92
series tensor_active 62
series dram_active 45
series mem_used_mib 70000
process pid=$healthy_pid sm=95 used_mib=69000
device name="NVIDIA H100 80GB HBM3" uuid=GPU-idle bus=00000000:1a:00.0 power_limit_w=700 max_sm_mhz=1980
series gpu_util 0
series power_w 70
series sm_mhz 345
series mem_used_mib 0
device name="NVIDIA H100 80GB HBM3" uuid=GPU-falls bus=00000000:1b:00.0 power_limit_w=700 max_sm_mhz=1980
series gpu_util 50
series power_w 300
lost_after 40
device name="NVIDIA H100 80GB HBM3" uuid=GPU-noperm bus=00000000:1c:00.0 power_limit_w=700 max_sm_mhz=1980
series gpu_util 50
series power_w 300
error util 4
device name="NVIDIA H100 80GB HBM3" uuid=GPU-plain bus=00000000:1e:00.0 power_limit_w=700 max_sm_mhz=1980
series gpu_util 65
series power_w 400
series sm_mhz 1980
device name="NVIDIA A100-SXM4-80GB" uuid=GPU-migboard bus=00000000:1d:00.0 power_limit_w=400 max_sm_mhz=1410 mig=1
series power_w 300
instance gi=3 profile=3g.40gb memory_total_mib=40192 gpm=1
series gr_engine 80
series sm_active 60
series tensor_active 30
series dram_active 20
EOT
port=$(free_port)
GPUTRIAGE_FAKE_NVML_SCENARIO=$tmp/scenario "$bin" agent --listen "127.0.0.1:$port" --nvml-library "$fake_nvml" \
  --interval 0.05 --window 6 --judge-every 0.5 --price-per-gpu-hour 2 2>"$tmp/agent.err" &
agent_pid=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$port/healthz" >"$tmp/health" || { echo "FAIL: /healthz"; cat "$tmp/agent.err"; fail=1; }
sleep 4  # 80 samples: a full window's judgement, and the fourth GPU lost after 40
curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/metrics.txt" || { echo "FAIL: /metrics"; cat "$tmp/agent.err"; fail=1; }
# promtool: no parse error (exit 1); its lint (exit 3) may only name DCGM's own
# label names (UUID, modelName, Hostname, ...), which dashboards depend on.
check_metrics() {  # FILE
  promtool check metrics <"$1" >"$tmp/promtool.out" 2>&1
  local rc=$?
  if [ $rc != 0 ] && [ $rc != 3 ]; then echo "FAIL: promtool check metrics: exit $rc"; cat "$tmp/promtool.out"; return 1; fi
  if grep -v "^DCGM_FI_[A-Z0-9_]* label names should be written in 'snake_case' not 'camelCase'$" "$tmp/promtool.out" | grep -q .; then
    echo "FAIL: promtool check metrics:"; grep -v "^DCGM_FI_" "$tmp/promtool.out" | head; return 1
  fi
  echo "ok: promtool check metrics: parses; $(grep -c . "$tmp/promtool.out") lint notes, all on DCGM's own camelCase labels"
}
check_metrics "$tmp/metrics.txt" || fail=1
curl -sf -H "Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5" \
  "http://127.0.0.1:$port/metrics" -D "$tmp/om.headers" >"$tmp/metrics.om" || { echo "FAIL: OpenMetrics"; fail=1; }
grep -qi "content-type: application/openmetrics-text" "$tmp/om.headers" || { echo "FAIL: OpenMetrics content type"; cat "$tmp/om.headers"; fail=1; }
[ "$(tail -n 1 "$tmp/metrics.om")" = "# EOF" ] || { echo "FAIL: OpenMetrics page does not end in # EOF"; fail=1; }

/usr/bin/python3 - "$tmp/metrics.txt" "$job_pid" "$healthy_pid" <<'PY' || fail=1
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()  # strict: a byte that is not UTF-8 fails here
job_pid, healthy_pid = sys.argv[2], sys.argv[3]
series = {}
for line in text.splitlines():
    if line.startswith("#") or not line:
        continue
    m = re.match(r'([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})? (\S+)$', line)
    assert m, line
    labels = dict(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
    series.setdefault(m.group(1), []).append((labels, float(m.group(4))))

def one(name, uuid):
    rows = [(l, v) for l, v in series.get(name, []) if l.get("UUID", l.get("uuid")) == uuid]
    assert len(rows) == 1, (name, uuid, rows)
    return rows[0]

# DCGM's names and labels, as dcgm-exporter writes them.
labels, util = one("DCGM_FI_DEV_GPU_UTIL", "GPU-healthy")
assert util == 99, util
assert labels["gpu"] == "1" and labels["device"] == "nvidia1" and labels["modelName"] == "NVIDIA H100 80GB HBM3", labels
assert labels["pci_bus_id"].lower() == "00000000:19:00.0", labels
_, tensor = one("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "GPU-healthy")
assert abs(tensor - 0.62) < 1e-9, tensor
_, fb = one("DCGM_FI_DEV_FB_USED", "GPU-healthy")
assert fb == 70000, fb

verdict = {l["uuid"]: l["verdict"] for l, v in series["gputriage_finding"]}
util = {l["uuid"]: v for l, v in series["gputriage_gpu_utilization_percent"]}
idle = {l["uuid"]: v for l, v in series["gputriage_idle_usd_per_hour"]}
print("verdicts:", verdict)
print("window utilization:", {k: round(v, 1) for k, v in util.items()})
print("idle $/h:", {k: round(v, 3) for k, v in idle.items()})
# The scenario's arithmetic: stop-and-go busy 2 samples of 6 at 95 % = 31.7 %;
# healthy 99 %; idle 0 %. Idle dollars = $2/h x (1 - utilization).
assert abs(util["GPU-stopgo"] - 95 * 2 / 6) < 3, util
assert util["GPU-healthy"] == 99 and util["GPU-idle"] == 0, util
for uuid in ("GPU-stopgo", "GPU-healthy", "GPU-idle"):
    assert abs(idle[uuid] - 2 * (1 - util[uuid] / 100)) < 1e-9, (uuid, idle[uuid], util[uuid])
assert verdict["GPU-idle"] == "idle", verdict
assert verdict["GPU-healthy"] == "at_compute_limit", verdict
assert verdict["GPU-stopgo"] not in ("at_compute_limit", "idle"), verdict
assert idle["GPU-idle"] > idle["GPU-stopgo"] > idle["GPU-healthy"], idle
# The job on each GPU, from its process.
jobs = {l["uuid"]: l.get("job_name", "") for l, v in series["gputriage_finding"]}
assert jobs["GPU-stopgo"] == f"sleep (pid {job_pid})", jobs
assert jobs["GPU-idle"] == "", jobs
assert jobs["GPU-healthy"] == f"train\ufffd\ufffd (pid {healthy_pid})", jobs
# A GPU lost: a series of its own, no verdict, no DCGM values.
lost = [l["uuid"] for l, v in series.get("gputriage_gpu_lost", []) if v == 1]
assert lost == ["GPU-falls"], lost
assert "GPU-falls" not in verdict and "GPU-falls" not in util
assert not [l for l, v in series["DCGM_FI_DEV_GPU_UTIL"] if l["UUID"] == "GPU-falls"]
assert series["gputriage_nvml_up"][0][1] == 1
# Issue 24: a GPU whose utilization call fails says so in a series of its own.
errors = [(l["uuid"], l["metric"], l["error"]) for l, v in series.get("gputriage_gpu_metric_error", []) if v == 1]
assert [e for e in errors if e[0] == "GPU-noperm" and e[1] == "utilization" and e[2].startswith("Insufficient Permissions")], errors
assert not [e for e in errors if e[0] != "GPU-noperm"], errors  # the MIG instance's missing utilization is no error
# A MIG instance is judged on its graphics engine activity (80 %), as diagnose does.
mig = [(l, v) for l, v in series["gputriage_gpu_utilization_percent"] if l.get("mig_instance") == "3"]
assert len(mig) == 1 and abs(mig[0][1] - 80) < 1e-6, mig
assert [l for l, v in series["gputriage_finding"] if l.get("mig_instance") == "3"], "no verdict for the MIG instance"
assert [l for l, v in series["gputriage_idle_usd_per_hour"] if l.get("mig_instance") == "3"], "no idle dollars for the MIG instance"
# Every GPU judged has one finding series, "none" when nothing was found (a
# steady 65 % without profiling counters: no rule fires).
judged = {l["uuid"]: (l["verdict"], l["severity"]) for l, v in series["gputriage_finding"]}
assert {"GPU-stopgo", "GPU-healthy", "GPU-idle", "GPU-plain"} <= set(judged), judged
assert judged["GPU-plain"] == ("none", "none"), judged["GPU-plain"]
print("ok: DCGM names and labels; verdicts, window utilization and idle dollars as the scenario says; the lost GPU named;"
      " the failing utilization call named; the MIG instance judged on GR engine activity")
PY

# The stop-and-go job exits: its GPU's window starts again (no verdict about the
# job that has gone until the new window has enough values).
kill "$job_pid"
wait "$job_pid" 2>/dev/null
job_pid=""
sleep 1.2
curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/after.txt"
covered=$(grep '^gputriage_window_covered_seconds{.*uuid="GPU-stopgo"' "$tmp/after.txt" | awk '{print $NF}')
job=$(grep '^gputriage_finding{.*uuid="GPU-stopgo"' "$tmp/after.txt" | grep -o 'job_name="[^"]*"')
if [ -n "$job" ] || awk "BEGIN { exit !(${covered:-0} > 2) }"; then
  echo "FAIL: after the job exited, GPU-stopgo still has job '$job' or a window of ${covered:-?} s"
  grep 'GPU-stopgo' "$tmp/after.txt" | grep gputriage_ | head
  fail=1
else
  echo "ok: the job on GPU-stopgo exited; its window started again (${covered:-0} s covered)"
fi

kill -TERM "$agent_pid"
wait "$agent_pid"
rc=$?
agent_pid=""
[ "$rc" = 0 ] || { echo "FAIL: agent exit $rc on SIGTERM"; cat "$tmp/agent.err"; fail=1; }

# NVML cannot be loaded: the agent serves, says why, and stays healthy.
port=$(free_port)
"$bin" agent --listen "127.0.0.1:$port" --nvml-library /nonexistent/libnvidia-ml.so.1 --interval 0.05 2>"$tmp/agent2.err" &
agent_pid=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/nonvml.txt" || { echo "FAIL: /metrics without NVML"; fail=1; }
grep -q '^gputriage_nvml_up{error="[^"]\+",hostname="[^"]*"} 0$' "$tmp/nonvml.txt" || { echo "FAIL: nvml_up 0 with a reason"; grep nvml_up "$tmp/nonvml.txt"; fail=1; }
check_metrics "$tmp/nonvml.txt" >/dev/null || { echo "FAIL: promtool without NVML"; cat "$tmp/promtool.out"; fail=1; }
curl -sf "http://127.0.0.1:$port/healthz" >/dev/null || { echo "FAIL: /healthz without NVML"; fail=1; }
# Bad flags are usage errors, not crashes.
"$bin" agent --listen nonsense >/dev/null 2>"$tmp/usage.err"
[ $? = 2 ] && grep -q "HOST:PORT" "$tmp/usage.err" || { echo "FAIL: --listen nonsense"; cat "$tmp/usage.err"; fail=1; }
"$bin" agent --listen "127.0.0.1:$port" --nvml-library /nonexistent 2>"$tmp/busy.err" >/dev/null
[ $? = 3 ] && grep -q "cannot listen" "$tmp/busy.err" || { echo "FAIL: a port in use"; cat "$tmp/busy.err"; fail=1; }
[ $fail = 0 ] && echo "ok: without NVML the agent serves nvml_up 0 with the reason and stays healthy; bad --listen and a port in use are named"
kill "$agent_pid" 2>/dev/null

# NVML init failing (driver not loaded), then succeeding: the agent tries again
# every --nvml-retry, and the GPU's series and verdict arrive once it opens.
cat >"$tmp/init" <<EOT
init_error 9
device name="NVIDIA H100 80GB HBM3" uuid=GPU-late bus=00000000:18:00.0 power_limit_w=700 max_sm_mhz=1980
series gpu_util 0
series power_w 70
EOT
port=$(free_port)
GPUTRIAGE_FAKE_NVML_SCENARIO=$tmp/init "$bin" agent --listen "127.0.0.1:$port" --nvml-library "$fake_nvml" \
  --interval 0.05 --window 2 --judge-every 0.2 --nvml-retry 0.5 2>"$tmp/agent3.err" &
agent_pid=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/init1.txt" && break; sleep 0.1; done
grep -q '^gputriage_nvml_up{error="[^"]*[Dd]river[^"]*",hostname="[^"]*"} 0$' "$tmp/init1.txt" ||
  { echo "FAIL: NVML init failing is not nvml_up 0 with the driver named"; grep nvml_up "$tmp/init1.txt"; fail=1; }
sed -i '/^init_error/d' "$tmp/init"  # the driver is back
found=""
for _ in $(seq 1 60); do
  curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/init2.txt"
  grep -q '^gputriage_finding{.*uuid="GPU-late".*verdict="idle".*} 1$' "$tmp/init2.txt" && { found=1; break; }
  sleep 0.1
done
if [ -n "$found" ] && grep -q '^gputriage_nvml_up{error="",hostname="[^"]*"} 1$' "$tmp/init2.txt" &&
   grep -q '^gputriage_agent_nvml_opens_total{hostname="[^"]*"} 1$' "$tmp/init2.txt"; then
  echo "ok: NVML failing to initialise, then succeeding: nvml_up 0 with the reason, then 1, one open, the GPU judged idle"
else
  echo "FAIL: NVML succeeding after failing"; grep -E "nvml|GPU-late" "$tmp/init2.txt"; fail=1
fi
kill "$agent_pid" 2>/dev/null
kill "$healthy_pid" 2>/dev/null
# From a local dcgm-exporter instead of NVML (a stand-in: three H100s under
# Kubernetes pods, tests/fake_dcgm_exporter.py): the pods named from its
# labels, the verdicts drawn, its DCGM series not served twice; the exporter
# gone is a series with the reason.
/usr/bin/python3 "$(dirname "$0")/fake_dcgm_exporter.py" "$tmp/exporter.port" fleet-legacy node-x &
exporter_pid=$!
for _ in $(seq 1 50); do [ -s "$tmp/exporter.port" ] && break; sleep 0.1; done
port=$(free_port)
"$bin" agent --listen "127.0.0.1:$port" --dcgm-exporter "http://127.0.0.1:$(cat "$tmp/exporter.port")/metrics" \
  --interval 0.1 --window 8 --judge-every 0.2 --price-per-gpu-hour 2 2>"$tmp/agent4.err" &
agent_pid=$!
found=""
# A window covering more than one 6 s cycle of the stop-and-go GPU.
for _ in $(seq 1 200); do
  curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/exporter.txt"
  [ "$(grep -c '^gputriage_finding{' "$tmp/exporter.txt")" = 3 ] &&
    grep -q '^gputriage_window_covered_seconds{.*uuid="GPU-node-x-0".*} [7-9]' "$tmp/exporter.txt" && { found=1; break; }
  sleep 0.1
done
/usr/bin/python3 - "$tmp/exporter.txt" <<'PY' || fail=1
import re, sys
text = open(sys.argv[1]).read()
def series(name):
    out = {}
    for labels, value in re.findall(r"^" + name + r"\{(.*)\} (\S+)$", text, re.M):
        l = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        out[l["uuid"]] = (l, float(value))
    return out
finding = series("gputriage_finding")
assert set(finding) == {"GPU-node-x-0", "GPU-node-x-1", "GPU-node-x-2"}, finding
healthy, idle = finding["GPU-node-x-1"][0], finding["GPU-node-x-2"][0]
assert (healthy["namespace"], healthy["pod"], healthy["container"]) == ("team-b", "bf16-pretrain", "main"), healthy
assert healthy["job_name"] == "pod team-b/bf16-pretrain/main" and healthy["verdict"] == "at_compute_limit", healthy
assert idle["verdict"] == "idle" and "pod" not in idle, idle
util = series("gputriage_gpu_utilization_percent")
assert util["GPU-node-x-1"][1] == 99 and util["GPU-node-x-2"][1] == 0, util
assert 15 < util["GPU-node-x-0"][1] < 85, util["GPU-node-x-0"]  # stop-and-go: between its busy and idle levels
idle_usd = series("gputriage_idle_usd_per_hour")
assert abs(idle_usd["GPU-node-x-2"][1] - 2.0) < 1e-9, idle_usd
assert "DCGM_FI_DEV_GPU_UTIL" not in text, "the exporter's own series are served again"
assert re.search(r'^gputriage_dcgm_exporter_up\{url="[^"]+",error="",hostname="[^"]*"\} 1$', text, re.M), "dcgm_exporter_up"
assert "gputriage_nvml_up" not in text
print("ok: from a dcgm-exporter: pods named from its labels, verdicts at_compute_limit / idle, its DCGM series not served twice")
PY
kill "$exporter_pid"
gone=""
for _ in $(seq 1 50); do
  curl -sf "http://127.0.0.1:$port/metrics" | grep -q '^gputriage_dcgm_exporter_up{url="[^"]*",error="[^"]\+",hostname="[^"]*"} 0$' && { gone=1; break; }
  sleep 0.1
done
[ -n "$gone" ] && echo "ok: the dcgm-exporter gone is gputriage_dcgm_exporter_up 0 with the reason" ||
  { echo "FAIL: the dcgm-exporter gone"; curl -s "http://127.0.0.1:$port/metrics" | grep dcgm_exporter_up; fail=1; }
kill "$agent_pid" 2>/dev/null
exit $fail
