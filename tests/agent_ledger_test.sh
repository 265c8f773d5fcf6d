#!/usr/bin/env bash
# The goodput ledger through the agent and `fleet`, against a real Prometheus.
# One agent on the fake NVML, two jobs, $2/GPU-hour:
#   GPU 0: a marked loop (tests/marker_writer.cc, ledger mode) started under
#          `gputriage record`: steps of 10 ms waiting for data and 10 ms of
#          compute, and after every 20 steps a 100 ms checkpoint and a 200 ms
#          evaluation; it keeps its own timers. Utilization 70 %.
#   GPU 1: a job without markers, busy (90 %) for 12 s, then idle for 11 s, again.
# The agent's ledger counters must match the loop's timers (shares within 5
# points) and the utilization pattern's arithmetic (idle phases of at least 10 s);
# `fleet --rank-by badput` must put the marked job first (about 70 % of its time
# is data wait, checkpoints and evaluation), although `--rank-by idle` puts the
# other first (its idle dollars are the larger), with badput dollars = the
# badput buckets' GPU-hours x the price.
set -u
bin=$1
fake_nvml=$2
marker_writer=$3
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  pkill -f "^$marker_writer 1000000 ledger 10 10" 2>/dev/null
  bash "$root/tests/prometheus_server.sh" stop "$tmp/prom" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
command -v prometheus >/dev/null || { echo "FAIL: prometheus not installed (apt install prometheus)"; exit 1; }
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

printf 'device name="NVIDIA H100 80GB HBM3" uuid=GPU-r0 bus=00000000:18:00.0\nseries gpu_util 70\n' >"$tmp/record-gpu"
MARKER_WRITER_TIMERS=$tmp/timers GPUTRIAGE_FAKE_NVML_SCENARIO=$tmp/record-gpu "$bin" record --nvml-library "$fake_nvml" \
  --no-store --no-mlflow --interval 0.5 -- "$marker_writer" 1000000 ledger 10 10 >"$tmp/record.out" 2>"$tmp/record.err" &
pids+=($!)
writer=""
for _ in $(seq 1 100); do
  writer=$(pgrep -f "^$marker_writer 1000000 ledger 10 10" | head -1)
  [ -n "$writer" ] && break
  sleep 0.1
done
[ -n "$writer" ] || { echo "FAIL: the marked loop did not start"; cat "$tmp/record.err"; exit 1; }
sleep 600 &
pids+=($!)
unmarked=$!
{
  echo 'device name="NVIDIA H100 80GB HBM3" uuid=GPU-l0 bus=00000000:18:00.0 power_limit_w=700 max_sm_mhz=1980'
  echo 'series gpu_util 70'
  echo "process pid=$writer sm=70 used_mib=20000"
  echo 'device name="NVIDIA H100 80GB HBM3" uuid=GPU-l1 bus=00000000:19:00.0 power_limit_w=700 max_sm_mhz=1980'
  echo "series gpu_util $(printf '90 %.0s' $(seq 120)) $(printf '0 %.0s' $(seq 110))"
  echo "process pid=$unmarked sm=90 used_mib=20000"
} >"$tmp/scenario"
port=$(free_port)
GPUTRIAGE_FAKE_NVML_SCENARIO=$tmp/scenario "$bin" agent --listen "127.0.0.1:$port" --nvml-library "$fake_nvml" \
  --hostname node-l --interval 0.1 --window 4 --judge-every 0.5 --price-per-gpu-hour 2 2>"$tmp/agent.err" &
pids+=($!)
prom=$(bash "$root/tests/prometheus_server.sh" start "$tmp/prom" "" "127.0.0.1:$port") ||
  { echo "FAIL: Prometheus did not start"; exit 1; }
sleep 36
curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/page.txt" || { echo "FAIL: the agent's page"; cat "$tmp/agent.err"; exit 1; }
cp "$tmp/timers" "$tmp/timers.at-page" 2>/dev/null
common=(--prometheus "$prom" --range 30s --step 1s --by job --json)
"$bin" fleet "${common[@]}" --rank-by badput >"$tmp/badput.json" 2>"$tmp/fleet.err" || { echo "FAIL: fleet --rank-by badput"; cat "$tmp/fleet.err"; fail=1; }
"$bin" fleet "${common[@]}" --rank-by idle >"$tmp/idle.json" 2>>"$tmp/fleet.err" || { echo "FAIL: fleet --rank-by idle"; fail=1; }
"$bin" fleet --prometheus "$prom" --range 30s --step 1s --by job --rank-by badput >"$tmp/badput.txt" 2>>"$tmp/fleet.err" || fail=1
"$bin" fleet --prometheus "$prom" --range 30s --step 1s --by job --rank-by cheapest >/dev/null 2>"$tmp/bad-flag.err"
[ $? = 2 ] || { echo "FAIL: --rank-by cheapest was accepted"; fail=1; }

/usr/bin/python3 - "$tmp" <<'PY' || fail=1
import json, re, sys
tmp = sys.argv[1]
# The agent's page: each GPU's ledger counters and its sampled seconds.
ledger, sampled = {}, {}
for line in open(f"{tmp}/page.txt"):
    m = re.match(r'gputriage_ledger_gpu_seconds_total\{(.*)\} (\S+)$', line)
    if m:
        uuid = re.search(r'uuid="([^"]*)"', m.group(1)).group(1)
        bucket = re.search(r'bucket="([^"]*)"', m.group(1)).group(1)
        ledger.setdefault(uuid, {})[bucket] = float(m.group(2))
    m = re.match(r'gputriage_gpu_sampled_seconds_total\{(.*)\} (\S+)$', line)
    if m:
        sampled[re.search(r'uuid="([^"]*)"', m.group(1)).group(1)] = float(m.group(2))
marked, plain = ledger["GPU-l0"], ledger["GPU-l1"]
data, compute, ckpt, evaluation, cycles = map(float, open(f"{tmp}/timers.at-page").read().split())
loop_total = data + compute + ckpt + evaluation
total = sum(marked.values())
print(f"ok: the marked loop's ledger: " + ", ".join(f"{b} {v:.2f} s" for b, v in marked.items() if v > 0) +
      f" (its timers: data {data/1e3:.2f}, compute {compute/1e3:.2f}, checkpoint {ckpt/1e3:.2f}, eval {evaluation/1e3:.2f} s)")
for bucket, truth in [("data_wait", data), ("productive", compute), ("checkpoint_save", ckpt), ("evaluation", evaluation)]:
    share, want = marked[bucket] / total, truth / loop_total
    # On a failure, all of it: the ledger's buckets, the time it sampled, the loop's cycles.
    assert abs(share - want) < 0.05, (bucket, share, want, marked, sampled.get("GPU-l0"), cycles)
assert set(marked) >= {"productive", "data_wait", "checkpoint_save", "evaluation", "idle", "startup", "between_steps"}, marked
assert "unsplit" not in marked and "hang" not in marked and "host_stall" not in marked, marked
# Accounted up to a settled horizon (the step hold, 1 s here), never beyond the time sampled.
assert sampled["GPU-l0"] - 2.5 <= total <= sampled["GPU-l0"] + 0.2, (total, sampled["GPU-l0"])
# The job without markers: idle phases and the rest, adding up to the time sampled.
assert set(plain) == {"idle", "unsplit"}, plain
ticks = round(sampled["GPU-l1"] / 0.1)
pattern = [90] * 120 + [0] * 110
idle = unsplit = low = 0
for i in range(ticks):  # the pattern's arithmetic: a low stretch is idle once it reaches 10 s
    if pattern[i % len(pattern)] <= 5:
        low += 1
        if low >= 100:
            idle += 1 if low > 100 else 100
    else:
        unsplit += 1 + (low if low < 100 else 0)
        low = 0
pending = low if low < 100 else 0  # a low stretch not yet 10 s long: not counted yet
# The fake GPU's pattern advances one value per sample, and the samples are counted
# here as the time sampled / 0.1 s: every tick the agent takes late shifts that
# count by one (0.1 s). A few late ticks in 36 s: 0.35 s.
assert abs(plain["idle"] + plain["unsplit"] + pending * 0.1 - sampled["GPU-l1"]) < 0.35, (plain, pending, sampled["GPU-l1"])
assert abs(plain["idle"] - idle * 0.1) < 0.25 and abs(plain["unsplit"] - unsplit * 0.1) < 0.25, (plain, idle, unsplit)
print(f"ok: the job without markers: idle {plain['idle']:.1f} s, unsplit {plain['unsplit']:.1f} s "
      f"(the pattern's: {idle * 0.1:.1f} s and {unsplit * 0.1:.1f} s)")

badput, by_idle = json.load(open(f"{tmp}/badput.json")), json.load(open(f"{tmp}/idle.json"))
assert badput["rank_by"] == "badput" and by_idle["rank_by"] == "idle"
groups = badput["groups"]
assert len(groups) == 2, [g["name"] for g in groups]
first, second = groups
assert "marker_writer" in first["name"] and "sleep" in second["name"], [g["name"] for g in groups]
assert [g["name"] for g in by_idle["groups"]] == [second["name"], first["name"]], [g["name"] for g in by_idle["groups"]]
assert first["ledger"]["badput_usd"] > second["ledger"]["badput_usd"] > 0
for g in groups:
    l = g["ledger"]
    want = sum(b["gpu_hours"] * 2 for b in l["buckets"] if b["bucket"] not in ("productive", "unsplit"))
    assert abs(l["badput_usd"] - want) < 1e-9 + 1e-6 * want, (l["badput_usd"], want)
    for b in l["buckets"]:
        assert abs(b["cost_usd"] - b["gpu_hours"] * 2) < 1e-12 + 1e-9 * b["cost_usd"], b
        assert b["badput"] == (b["bucket"] not in ("productive", "unsplit")), b
    # The ledger covers the GPU time of the range (the marked one lags by the step hold).
    assert 0.8 * g["gpu_hours"] <= l["gpu_hours"] <= 1.1 * g["gpu_hours"], (g["name"], l["gpu_hours"], g["gpu_hours"])
goodput = first["ledger"]["goodput_percent"]
assert abs(goodput - 100 * compute / loop_total) < 5, (goodput, 100 * compute / loop_total)
assert second["ledger"]["goodput_percent"] is None  # no steps: not known
assert abs(badput["ledger"]["badput_usd"] - first["ledger"]["badput_usd"] - second["ledger"]["badput_usd"]) < 1e-9
print(f"ok: fleet --rank-by badput: " + "; ".join(f'{g["name"]}: badput ${g["ledger"]["badput_usd"]:.5f}, idle ${g["idle_cost_usd"]:.5f}' for g in groups) +
      f"; --rank-by idle puts {by_idle['groups'][0]['name']} first")
PY
# The dashboard's ledger panels against this Prometheus: the goodput of the one
# marked job, and the badput rate of both at $2/GPU-hour.
/usr/bin/python3 - "$prom" "$root/deploy/grafana/gputriage-dashboard.json" "$tmp/badput.json" <<'PY' || fail=1
import json, re, sys, urllib.parse, urllib.request
prom, dashboard, fleet = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
def query(expr):
    expr = re.sub(r"\$\{?(hostname|gpu)\}?", ".*", expr.replace("$__rate_interval", "10s"))
    with urllib.request.urlopen(prom + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}), timeout=10) as r:
        return json.load(r)["data"]["result"]
panels = {p["title"]: p for p in dashboard["panels"]}
goodput = query(panels["Goodput over time (jobs with step markers)"]["targets"][0]["expr"])
assert len(goodput) == 1, goodput
marked = fleet["groups"][0]["ledger"]["goodput_percent"]
assert abs(float(goodput[0]["value"][1]) - marked) < 10, (goodput, marked)
buckets = {r["metric"]["bucket"] for r in query(panels["Where the GPU time goes (ledger buckets)"]["targets"][0]["expr"])}
assert {"productive", "data_wait", "evaluation", "checkpoint_save", "idle", "unsplit"} <= buckets, buckets
badput = {r["metric"]["job_name"]: float(r["value"][1]) for r in query(panels["Badput dollars per hour, by job (top 20)"]["targets"][0]["expr"])}
assert len(badput) == 2, badput
marked_rate = [v for k, v in badput.items() if "marker_writer" in k][0]
assert abs(marked_rate - 2 * (1 - marked / 100)) < 0.3, (marked_rate, marked)  # $2/h x its badput share
print(f"ok: the dashboard: goodput {float(goodput[0]['value'][1]):.1f}% (fleet: {marked:.1f}%), badput $/h {badput}")
PY
grep -q "Goodput ledger" "$tmp/badput.txt" && grep -q "most badput dollars first" "$tmp/badput.txt" ||
  { echo "FAIL: the text report has no ledger"; cat "$tmp/badput.txt"; fail=1; }
if [ "$fail" = 0 ]; then echo "PASS"; else
  for f in record.err agent.err fleet.err; do echo "--- $f (last lines)"; tail -n 8 "$tmp/$f"; done
fi
exit "$fail"
