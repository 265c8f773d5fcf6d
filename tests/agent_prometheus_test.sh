#!/usr/bin/env bash
# The agent in a real Prometheus stack (Debian's prometheus, started here on
# 127.0.0.1, scraping every second): two agents as two nodes against the fake
# NVML (node-a: a stop-and-go job and an idle GPU; node-b: a healthy job), the
# rules in deploy/prometheus loaded. Checks:
#  - promtool check rules passes; Prometheus loads every rule healthy, and the
#    recording rules return data (idle dollars by node: node-a above node-b);
#  - the Grafana dashboard (deploy/grafana) passes a structural check, and each
#    of its PromQL queries (and its variables') parses and returns data here;
#  - DCGM's series arrive under DCGM's names, next to gputriage's.
set -u
bin=$1
fake_nvml=$2
root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/tests
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  bash "$here/prometheus_server.sh" stop "$tmp/prom"
  rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
command -v prometheus >/dev/null || { echo "FAIL: prometheus not installed (apt install prometheus)"; exit 1; }
source "$here/two_agent_nodes.sh"
sleep 600 &
pids+=($!)
start_two_agent_nodes "$bin" "$fake_nvml" "$tmp" $!
targets=("${agent_targets[@]}")
promtool check rules "$root/deploy/prometheus/gputriage-rules.yml" >"$tmp/rules.out" 2>&1 ||
  { echo "FAIL: promtool check rules"; cat "$tmp/rules.out"; fail=1; }
prom=$(bash "$here/prometheus_server.sh" start "$tmp/prom" "$root/deploy/prometheus/gputriage-rules.yml" "${targets[@]}") ||
  { echo "FAIL: Prometheus did not start"; exit 1; }
# Both targets up, and a few judgements scraped.
for _ in $(seq 1 60); do
  up=$(curl -sf "$prom/api/v1/query" --data-urlencode 'query=count(gputriage_finding)' |
       /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)')
  [ "$up" = 3 ] && break
  sleep 0.5
done
[ "$up" = 3 ] || { echo "FAIL: Prometheus has $up of 3 GPUs' verdicts"; tail -5 "$tmp"/*.err; fail=1; }
sleep 4  # rules evaluated, a few seconds of series for the range queries

/usr/bin/python3 - "$prom" "$root/deploy/grafana/gputriage-dashboard.json" <<'PY' || fail=1
import json, re, sys, urllib.parse, urllib.request
prom, dashboard_path = sys.argv[1], sys.argv[2]

def query(expr):
    url = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:  # a PromQL parse error is a 400 with the reason
        body = json.load(e)
    assert body["status"] == "success", (expr, body.get("error"))
    return body["data"]["result"]

# Rules: loaded and healthy; recording rules have data.
with urllib.request.urlopen(prom + "/api/v1/rules", timeout=10) as r:
    groups = json.load(r)["data"]["groups"]
rules = [rule for g in groups for rule in g["rules"]]
assert len(rules) == 10, len(rules)  # 4 recording, 6 alerting (agent down and stalled among them)
assert all(rule["health"] == "ok" for rule in rules), [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
by_node = {r["metric"]["hostname"]: float(r["value"][1]) for r in query("hostname:gputriage_idle_usd_per_hour:sum")}
assert set(by_node) == {"node-a", "node-b"}, by_node
assert by_node["node-a"] > by_node["node-b"], by_node
print(f"ok: 10 rules loaded and healthy; idle $/h by node {by_node}")

# DCGM's names, from the agents.
util = query('DCGM_FI_DEV_GPU_UTIL{Hostname="node-b"}')
assert len(util) == 1 and float(util[0]["value"][1]) == 99 and util[0]["metric"]["UUID"] == "GPU-b0", util

# The dashboard: structure.
d = json.load(open(dashboard_path))
for key in ("title", "uid", "schemaVersion", "panels", "templating"):
    assert key in d, key
variables = {v["name"] for v in d["templating"]["list"]}
assert variables == {"datasource", "hostname", "gpu"}, variables
# Nodes and GPUs from the utilization series, which every judged GPU has (a MIG
# instance's too), not from findings (issue 24: a node without one vanished).
for v in d["templating"]["list"]:
    if v["name"] in ("hostname", "gpu"):
        assert "gputriage_gpu_utilization_percent" in json.dumps(v["query"]), v["query"]
ids = [p["id"] for p in d["panels"]]
assert len(ids) == len(set(ids)), ids
kinds = {"timeseries", "bargauge", "state-timeline", "table", "piechart", "stat"}
exprs = []
for p in d["panels"]:
    assert p["type"] in kinds, p["type"]
    assert all(k in p["gridPos"] for k in ("h", "w", "x", "y")) and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24, p["gridPos"]
    assert p["targets"], p["title"]
    refs = [t["refId"] for t in p["targets"]]
    assert len(refs) == len(set(refs)), refs
    for t in p["targets"]:
        assert t["datasource"]["uid"] == "${datasource}", t
        for used in re.findall(r"\$\{?(\w+)", t["expr"]):
            assert used in variables or used.startswith("__"), (used, t["expr"])
        exprs.append((p["title"], t["expr"]))
for v in d["templating"]["list"]:
    if v["type"] == "query":
        m = re.fullmatch(r"label_values\((.*), (\w+)\)", v["query"]["query"])
        assert m, v["query"]
        exprs.append((f"variable {v['name']}", f"group by ({m.group(2)}) ({m.group(1)})"))

# Every query parses and returns data against this Prometheus (variables as "All").
def substitute(expr):
    expr = expr.replace("$__rate_interval", "1m").replace("$__interval", "1s").replace("$__range", "5m")
    return re.sub(r"\$\{?(hostname|gpu)\}?", ".*", expr)
for title, expr in exprs:
    result = query(substitute(expr))
    # Goodput needs a job with step markers, which these nodes do not run
    # (tests/agent_ledger_test.sh checks that panel against one).
    assert result or 'bucket="productive"' in expr, (title, expr, "no data")
print(f"ok: the dashboard's {len(d['panels'])} panels and {len(exprs)} queries parse and return data")
PY
exit $fail
