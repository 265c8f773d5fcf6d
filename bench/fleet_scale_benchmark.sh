#!/usr/bin/env bash
# Benchmark (not a test): `gputriage fleet` against fleets of 10,000, 50,000 and
# 200,000 GPU series (a fake Prometheus, bench/fake_prometheus.py, answering the
# agent route's queries; every GPU's figures depend on its number only). Prints
# wall time and peak RSS for each, ranked by GPU with every group written
# (--top 0), and checks that the larger fleets rank the GPUs they share with the
# smallest in the same order, with the same figures. Each size runs again with
# --rank-by badput (the agents' goodput ledgers read): its time and RSS beside.
#
#   bash bench/fleet_scale_benchmark.sh [GPUS ...]     (default: 10000 50000 200000)
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10000 50000 200000)
source bench/common.sh
results=$out/fleet_scale_results.tsv
: >"$results"
fake_pid=
trap '[ -n "$fake_pid" ] && kill "$fake_pid" 2>/dev/null; true' EXIT
for n in "${sizes[@]}"; do
  rm -f "$out/fake_prometheus.port"
  /usr/bin/python3 bench/fake_prometheus.py "$n" "$out/fake_prometheus.port" &
  fake_pid=$!
  for _ in $(seq 100); do [ -s "$out/fake_prometheus.port" ] && break; sleep 0.1; done
  port=$(cat "$out/fake_prometheus.port")
  /usr/bin/time -f "%e %M" -o "$out/time.txt" "$bin" fleet --prometheus "http://127.0.0.1:$port" --by gpu --json \
    --top 0 --timeout 600 >"$out/fleet_$n.json"
  # The same fleet ranked by the agents' goodput ledgers (a quarter of the GPUs
  # with step markers): one more query per batch, every GPU's buckets kept.
  /usr/bin/time -f "%e %M" -o "$out/time_ledger.txt" "$bin" fleet --prometheus "http://127.0.0.1:$port" --by gpu --json \
    --top 0 --timeout 600 --rank-by badput >"$out/fleet_ledger_$n.json"
  kill "$fake_pid"
  wait "$fake_pid" 2>/dev/null || true
  fake_pid=
  read -r wall rss <"$out/time.txt"
  read -r lwall lrss <"$out/time_ledger.txt"
  echo -e "$n\t$wall\t$rss\t$lwall\t$lrss" >>"$results"
  echo "fleet of $n GPU series: $wall s, peak RSS $((rss / 1024)) MiB; with the ledger (--rank-by badput): $lwall s, $((lrss / 1024)) MiB"
done
/usr/bin/python3 - "$out" "${sizes[@]}" <<'PY'
import json, sys
out, sizes = sys.argv[1], sys.argv[2:]
def ranking(n):
    groups = json.load(open(f"{out}/fleet_{n}.json"))["groups"]
    return [(g["labels"]["uuid"], round(g["idle_cost_usd"], 6), round(g["utilization_percent"], 9)) for g in groups]
base = ranking(sizes[0])
shared = {u for u, _, _ in base}
for n in sizes[1:]:
    mine = [r for r in ranking(n) if r[0] in shared]
    assert [r[0] for r in mine] == [r[0] for r in base], f"the {n}-GPU fleet ranks the {sizes[0]} shared GPUs differently"
    assert mine == base, f"the {n}-GPU fleet gives the shared GPUs other figures"
    print(f"{n} GPUs: the {len(base)} GPUs shared with the {sizes[0]}-GPU fleet are ranked in the same order with the same figures")
# The ledger run: every GPU has its buckets, ranked by badput dollars.
for n in sizes:
    doc = json.load(open(f"{out}/fleet_ledger_{n}.json"))
    groups = doc["groups"]
    assert doc["rank_by"] == "badput" and all(g["ledger"] for g in groups), n
    badput = [g["ledger"]["badput_usd"] for g in groups]
    assert badput == sorted(badput, reverse=True), f"the {n}-GPU fleet is not in badput order"
rows = [line.split("\t") for line in open(f"{out}/fleet_scale_results.tsv")]
for n, wall, rss, lwall, lrss in rows:
    print(f"  {int(n):>7} series  {float(wall):7.1f} s  peak RSS {int(rss) / 1024:7.1f} MiB (goal <= 300 at 200000); "
          f"with the ledger {float(lwall):7.1f} s, {int(lrss) / 1024:7.1f} MiB ({float(lwall) / float(wall):.2f}x the time)")
PY
