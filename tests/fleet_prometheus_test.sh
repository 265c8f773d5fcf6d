#!/usr/bin/env bash
# `gputriage fleet` against a real Prometheus (Debian's, on 127.0.0.1, scraping
# every second), twice:
#  1. two gputriage agents on the fake NVML: node-a runs a stop-and-go job on
#     GPU 0 (95 % for 2 ticks of 6: 31.7 %) and leaves GPU 1 idle; node-b runs a
#     healthy bf16 job (99 %, SM 92 %, tensor 62 %). Price $2/GPU-hour.
#  2. dcgm-exporter stand-ins alone (tests/fake_dcgm_exporter.py), one node under
#     the legacy names and one under DCGM 4.7 / exporter 4.9's ratios, each with
#     a stop-and-go pod (31.7 %), a healthy pod (99 %) and an idle GPU; prices
#     from the dated table (H100: $3.90).
# Each ranking must put the idle GPU and the stop-and-go job above the healthy
# one, with the verdicts idle / input_bound / at_compute_limit, utilization
# within the scenario's arithmetic, and idle dollars = GPU-hours × price ×
# (1 − utilization). Then the errors: an unreachable server, a server that is
# not a Prometheus, bad flags, a Prometheus without GPU series.
set -u
bin=$1
fake_nvml=$2
root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/tests
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  bash "$here/prometheus_server.sh" stop "$tmp/prom-agents"
  bash "$here/prometheus_server.sh" stop "$tmp/prom-dcgm"
  rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
command -v prometheus >/dev/null || { echo "FAIL: prometheus not installed (apt install prometheus)"; exit 1; }
source "$here/two_agent_nodes.sh"
sleep 600 &
pids+=($!)
start_two_agent_nodes "$bin" "$fake_nvml" "$tmp" $!
agents=("${agent_targets[@]}")
exporters=()
for generation in fleet-legacy fleet-ratio; do
  /usr/bin/python3 "$here/fake_dcgm_exporter.py" "$tmp/$generation.port" "$generation" "dcgm-${generation#fleet-}" &
  pids+=($!)
done
for generation in fleet-legacy fleet-ratio; do
  for _ in $(seq 1 50); do [ -s "$tmp/$generation.port" ] && break; sleep 0.1; done
  exporters+=("127.0.0.1:$(cat "$tmp/$generation.port")")
done
# The agents' Prometheus also scrapes one dcgm-exporter of a node without an
# agent: its 3 GPUs are warned about, never mixed into the agents' figures.
prom_agents=$(bash "$here/prometheus_server.sh" start "$tmp/prom-agents" "" "${agents[@]}" "${exporters[0]}") ||
  { echo "FAIL: Prometheus (agents) did not start"; exit 1; }
prom_dcgm=$(bash "$here/prometheus_server.sh" start "$tmp/prom-dcgm" "" "${exporters[@]}") ||
  { echo "FAIL: Prometheus (dcgm-exporter) did not start"; exit 1; }
# 20 s of series: the range below (18 s) is covered after the agents' first judgements.
started_at=$SECONDS
sleep 22

# One end for every ranking, so the checks below can read the same window from
# Prometheus itself.
end=$(date +%s)
range=(--range 18s --step 1s --end "$end")
"$bin" fleet --prometheus "$prom_agents" "${range[@]}" --by job --json >"$tmp/agents-job.json" 2>"$tmp/err" ||
  { echo "FAIL: fleet --by job (agents)"; cat "$tmp/err"; fail=1; }
"$bin" fleet --prometheus "$prom_agents" "${range[@]}" --by gpu --json >"$tmp/agents-gpu.json" 2>>"$tmp/err" || fail=1
"$bin" fleet --prometheus "$prom_agents" "${range[@]}" --by node --json >"$tmp/agents-node.json" 2>>"$tmp/err" || fail=1
"$bin" fleet --prometheus "$prom_agents" "${range[@]}" --by job --price-per-gpu-hour 4 --json >"$tmp/agents-price4.json" 2>>"$tmp/err" || fail=1
"$bin" fleet --prometheus "$prom_agents" "${range[@]}" --by job >"$tmp/agents-job.txt" 2>>"$tmp/err" || fail=1
"$bin" fleet --prometheus "$prom_dcgm" "${range[@]}" --by gpu --json >"$tmp/dcgm-gpu.json" 2>>"$tmp/err" ||
  { echo "FAIL: fleet --by gpu (dcgm-exporter)"; cat "$tmp/err"; fail=1; }
"$bin" fleet --prometheus "$prom_dcgm" "${range[@]}" --by namespace --monthly-spend 10000 --json >"$tmp/dcgm-ns.json" 2>>"$tmp/err" || fail=1
"$bin" fleet --prometheus "$prom_dcgm" "${range[@]}" --by job >"$tmp/dcgm-job.txt" 2>>"$tmp/err" || fail=1
# Issue 24: the same ~25 s of data read through a 10-minute range at 30 s steps:
# GPU-hours are the time the samples cover, not steps × 30 s plus the lookback,
# and the monthly figure is at the rate of the time observed, not of the range.
long=(--range 10m --step 30s)
"$bin" fleet --prometheus "$prom_agents" "${long[@]}" --by gpu --json >"$tmp/agents-long.json" 2>"$tmp/long.err" ||
  { echo "FAIL: fleet over a 10-minute range (agents)"; cat "$tmp/long.err"; fail=1; }
"$bin" fleet --prometheus "$prom_dcgm" "${long[@]}" --by gpu --json >"$tmp/dcgm-long.json" 2>"$tmp/long.err" ||
  { echo "FAIL: fleet over a 10-minute range (dcgm-exporter)"; cat "$tmp/long.err"; fail=1; }
elapsed=$((SECONDS - started_at))

/usr/bin/python3 - "$tmp" "$elapsed" "$prom_agents" "$end" <<'PY' || fail=1
import json, sys, urllib.parse, urllib.request
tmp = sys.argv[1]
elapsed = float(sys.argv[2])  # seconds of data at most (the Prometheus started just before)
prom_agents, end = sys.argv[3], sys.argv[4]

def raw_samples(prom, selector):
    """The raw samples Prometheus holds for a series in the fleet's 18 s window."""
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": f"{selector}[18s]", "time": end})
    with urllib.request.urlopen(url, timeout=10) as reply:  # local Prometheus; an 18 s window is a few kB
        result = json.loads(reply.read(1 << 20))["data"]["result"]
    assert len(result) == 1, (selector, result)
    return [float(v) for _, v in result[0]["values"]]
load = lambda name: json.load(open(f"{tmp}/{name}"))
STEP_H = 1 / 3600

def check_dollars(g, price):
    # idle $ = GPU-hours × price × (1 − utilization), and cost = GPU-hours × price.
    assert abs(g["cost_usd"] - g["gpu_hours"] * price) < 1e-9 + 1e-6 * g["cost_usd"], g
    want = g["gpu_hours"] * price * (1 - g["utilization_percent"] / 100)
    assert abs(g["idle_cost_usd"] - want) < 1e-9 + 1e-6 * want, (g["idle_cost_usd"], want)

def check_ranking(groups, price, where):
    # [idle GPU, stop-and-go, healthy] per node, in idle-dollar order.
    verdicts = [g["verdict"] for g in groups]
    for g in groups:
        check_dollars(g, price)
        assert 14 * STEP_H <= g["gpu_hours"] / g["gpus"] <= 19 * STEP_H, (where, g["name"], g["gpu_hours"])
    idle = [g for g in groups if g["verdict"] == "idle"]
    stop = [g for g in groups if g["verdict"] == "input_bound"]
    healthy = [g for g in groups if g["verdict"] == "at_compute_limit"]
    assert idle and stop and healthy and len(idle) + len(stop) + len(healthy) == len(groups), (where, verdicts)
    for g in idle:
        assert g["utilization_percent"] == 0 and g["idle_cost_usd"] == g["cost_usd"] > 0 and g["what_if"] is None, g
    for g in stop:
        # The scenario is 31.7 %, but on a loaded machine Prometheus's scrapes of
        # the wall-clock pattern miss busy seconds (20.0 % was seen): what the
        # figure must be is what Prometheus scraped, checked exactly where the
        # series is known (the agents by GPU, below). Here: both states were seen.
        assert 0 < g["utilization_percent"] < 95, (where, g["utilization_percent"])
        w = g["what_if"]
        assert w["to_percent"] == 75 and abs(w["saving_usd"] - g["cost_usd"] * (1 - g["utilization_percent"] / 75)) < 1e-9, w
    for g in healthy:
        assert 98.5 <= g["utilization_percent"] <= 99.5, (where, g["utilization_percent"])
    worst_healthy = max(groups.index(g) for g in healthy)
    best_wasteful = min(groups.index(g) for g in idle + stop)
    assert max(groups.index(g) for g in idle + stop) < min(groups.index(g) for g in healthy), (where, verdicts)
    costs = [g["idle_cost_usd"] for g in groups]
    assert costs == sorted(costs, reverse=True), costs
    print(f"ok: {where}: " + ", ".join(f'{g["name"]}: {g["verdict"]} {g["utilization_percent"]:.1f}% ${g["idle_cost_usd"]:.5f}' for g in groups))

# 1. the agents' series.
job = load("agents-job.json")
assert job["source"] == "gputriage" and job["by"] == "job", job["source"]
assert len(job["groups"]) == 3, [g["name"] for g in job["groups"]]
check_ranking(job["groups"], 2.0, "agents by job")
assert job["groups"][0]["labels"] == {"hostname": "node-a", "job_name": ""}, job["groups"][0]["labels"]
assert job["groups"][1]["labels"]["hostname"] == "node-a" and "sleep" in job["groups"][1]["labels"]["job_name"]
t = job["totals"]
assert t["gpus"] == 3 and abs(t["idle_cost_usd"] - sum(g["idle_cost_usd"] for g in job["groups"])) < 1e-9, t
assert abs(t["utilization_percent"] - sum(g["utilization_percent"] * g["gpu_hours"] for g in job["groups"]) / t["gpu_hours"]) < 1e-6
# A month at the rate of the time observed (the agents' first verdicts come a
# second or two into the range): at most the range, never a rate over time no
# sample covers.
assert 14 / 3600 <= t["observed_hours"] <= 18 / 3600, t
assert abs(t["idle_cost_usd_per_month"] - t["idle_cost_usd"] * 730 / t["observed_hours"]) < 1e-6 * t["idle_cost_usd_per_month"], t
assert job["queries"] and job["cannot_separate"] == [], job
assert any(w.startswith("3 GPU(s) appear only in DCGM series") for w in job["warnings"]), job["warnings"]
gpu = load("agents-gpu.json")
assert [g["labels"]["uuid"] for g in gpu["groups"]] == ["GPU-a1", "GPU-a0", "GPU-b0"], [g["labels"] for g in gpu["groups"]]
check_ranking(gpu["groups"], 2.0, "agents by GPU")
# Each GPU's utilization is the mean of the samples Prometheus holds for it in the
# window, to rounding: a figure that weighed them otherwise, or read another
# series, fails here whatever the load did to the scrapes.
for g in gpu["groups"]:
    raw = raw_samples(prom_agents, f'gputriage_gpu_utilization_percent{{uuid="{g["labels"]["uuid"]}"}}')
    want = sum(raw) / len(raw)
    assert abs(g["utilization_percent"] - want) < 0.01, (g["labels"]["uuid"], g["utilization_percent"], want, raw)
print("ok: agents by GPU: each utilization is the mean of its scraped samples")
node = load("agents-node.json")
assert [g["name"] for g in node["groups"]] == ["node-a", "node-b"], node["groups"]
a = node["groups"][0]
assert a["gpus"] == 2 and a["verdict"] in ("idle", "input_bound") and {v["verdict"] for v in a["verdicts"]} == {"idle", "input_bound"}, a
# A price given here replaces the agents': every dollar scales with it.
p4 = load("agents-price4.json")
assert p4["price_basis"].startswith("--price-per-gpu-hour 4"), p4["price_basis"]
check_ranking(p4["groups"], 4.0, "agents by job at $4")
for g in p4["groups"]:
    assert abs(sum(v["idle_cost_usd"] for v in g["verdicts"]) - g["idle_cost_usd"]) <= 0.25 * g["idle_cost_usd"] + 1e-6, g

# 2. dcgm-exporter's series alone, both name generations.
dg = load("dcgm-gpu.json")
assert dg["source"] == "dcgm_mixed", dg["source"]
assert len(dg["groups"]) == 6, [g["name"] for g in dg["groups"]]
assert "3.9" in dg["price_basis"] and "H100" in dg["price_basis"], dg["price_basis"]
check_ranking(dg["groups"], 3.90, "dcgm-exporter by GPU")
assert {g["labels"]["hostname"] for g in dg["groups"]} == {"dcgm-legacy", "dcgm-ratio"}
for host in ("dcgm-legacy", "dcgm-ratio"):  # the two generations read alike
    u = sorted(round(g["utilization_percent"]) for g in dg["groups"] if g["labels"]["hostname"] == host)
    assert u[0] == 0 and u[2] == 99, (host, u)
assert any("input_bound" in c and "launch_bound" in c for c in dg["cannot_separate"]), dg["cannot_separate"]
stop = [g for g in dg["groups"] if g["verdict"] == "input_bound"]
assert all("launch_bound" in g["cannot_exclude"] for g in stop), stop
ns = load("dcgm-ns.json")
names = [g["name"] for g in ns["groups"]]
assert names == ["(no namespace)", "team-a", "team-b"], names
price = 10000 / (730 * 6)
assert "--monthly-spend 10000" in ns["price_basis"], ns["price_basis"]
for g in ns["groups"]:
    check_dollars(g, price)
assert ns["groups"][1]["verdict"] == "input_bound" and ns["groups"][2]["verdict"] == "at_compute_limit", ns["groups"]
print("ok: namespaces " + ", ".join(f'{g["name"]} ${g["idle_cost_usd"]:.4f}' for g in ns["groups"]))

# 3. a range far longer than the data (issue 24): GPU time from what the samples cover.
for name in ("agents-long.json", "dcgm-long.json"):
    r = load(name)
    for g in r["groups"]:
        seconds = g["gpu_hours"] * 3600 / g["gpus"]
        # At most the data's span (and a scrape of slack); steps would count 30 s each plus 5 minutes of lookback.
        assert 10 <= seconds <= elapsed + 3, (name, g["name"], seconds, elapsed)
    t = r["totals"]
    assert t["observed_hours"] * 3600 <= elapsed + 31, (name, t["observed_hours"] * 3600, elapsed)
    assert abs(t["idle_cost_usd_per_month"] - t["idle_cost_usd"] * 730 / t["observed_hours"]) < 1e-6 * t["idle_cost_usd_per_month"] + 1e-9, t
    assert "cover" in t["gpu_hours_basis"], t["gpu_hours_basis"]
    print(f"ok: {name}: a 10-minute range over {elapsed:.0f} s of data: " +
          ", ".join(f'{g["gpu_hours"] * 3600 / g["gpus"]:.0f} s' for g in r["groups"]) +
          f"; observed {t['observed_hours'] * 3600:.0f} s")
PY
grep -q "no job on node-a .* idle " "$tmp/agents-job.txt" || { echo "FAIL: the text ranking"; cat "$tmp/agents-job.txt"; fail=1; }
grep -q "pod team-a/loader-starved" "$tmp/dcgm-job.txt" && grep -q "cannot separate" "$tmp/dcgm-job.txt" ||
  { echo "FAIL: the text ranking (dcgm-exporter)"; cat "$tmp/dcgm-job.txt"; fail=1; }

# Errors: clear, and the right exit codes.
expect() {  # CODE PATTERN ARGS...
  local code=$1 pattern=$2
  shift 2
  "$bin" fleet "$@" >"$tmp/out" 2>&1
  local got=$?
  if [ "$got" != "$code" ] || ! grep -q -- "$pattern" "$tmp/out"; then
    echo "FAIL: fleet $* exited $got (want $code), output:"; cat "$tmp/out"; fail=1
  fi
}
dead=$(free_port)
expect 3 "127.0.0.1:$dead.*could not connect" --prometheus "http://127.0.0.1:$dead" --timeout 5
expect 3 "not the Prometheus API's JSON" --prometheus "http://${exporters[0]}"
expect 2 "bad duration '7days'" --prometheus "$prom_agents" --range 7days
expect 2 "is longer than the --range" --prometheus "$prom_agents" --range 10s --step 1m
expect 2 "excludes" --prometheus "$prom_agents" --price-per-gpu-hour 2 --monthly-spend 100
expect 3 "no gputriage_gpu_utilization_percent series" --prometheus "$prom_dcgm" --source gputriage --range 1m
expect 3 "no GPU utilization series" --prometheus "$prom_dcgm" --end $(($(date +%s) - 3600)) --range 10m
# The agents serve DCGM's names too: --source dcgm reads those alone.
expect 0 "dcgm-exporter series (legacy DCGM names)" --prometheus "$prom_agents" --source dcgm --range 18s --step 1s
[ "$fail" = 0 ] && echo "PASS"
exit "$fail"
