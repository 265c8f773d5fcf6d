#!/usr/bin/env bash
# Benchmark (not a test): what logging to trackers costs the recorder, at the
# default cadence (a point every 10 s). One job (`sleep SECONDS`) is recorded
# through the fake NVML at the default 0.1 s sampling, alternating: without
# trackers, and with a real MLflow server (.venv, started here) plus TensorBoard
# event files. Prints the recorder's CPU time of each (user + sys, from
# /usr/bin/time), the median difference as a share of one core over the job's
# wall time, and the tracker thread's own CPU time as the recorder measured it.
# Goal: < 0.1 % of a core.
#
#   bash bench/tracker_overhead_benchmark.sh [SECONDS] [PAIRS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
pairs=${2:-3}
source bench/common.sh
[ -f build/release/fake_nvml/libnvidia-ml.so.1 ] || cmake --build --preset release --target fake_nvml >/dev/null
fake=$PWD/build/release/fake_nvml/libnvidia-ml.so.1
mlflow=$PWD/.venv/bin/mlflow
[ -x "$mlflow" ] || { echo "no $mlflow: run scripts/bootstrap.sh" >&2; exit 1; }
work=$(mktemp -d)
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
setsid "$mlflow" server --backend-store-uri "sqlite:///$work/mlflow.db" --artifacts-destination "$work/artifacts" \
  --host 127.0.0.1 --port "$port" --workers 1 >"$work/mlflow.log" 2>&1 &
server=$!
trap 'kill -9 -- -$server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.5
done
curl -sf "http://127.0.0.1:$port/health" >/dev/null || { cat "$work/mlflow.log" >&2; exit 1; }
# /health answers before the server has touched its store: its first run, made
# here, pays for the lazy imports and the first write (over 5 s on a loaded CI
# machine, which made a measured recording lose MLflow). What is measured is the
# recorder's CPU, not the server's first reply, so the server is warmed first and
# the recordings get a deadline that a busy machine cannot miss.
curl -sf --max-time 120 -X POST -H 'Content-Type: application/json' \
  -d '{"experiment_id": "0", "run_name": "warm-up"}' \
  "http://127.0.0.1:$port/api/2.0/mlflow/runs/create" >/dev/null \
  || { echo "the MLflow server made no run within 120 s" >&2; cat "$work/mlflow.log" >&2; exit 1; }

# One recording; prints "CPU_SECONDS THREAD_CPU_SECONDS".
measure() {
  local json=$work/report.json
  /usr/bin/time -f "%U %S" -o "$work/time" "$bin" record --no-store --nvml-library "$fake" --json "$json" "$@" \
    -- sleep "$seconds" 2>/dev/null
  /usr/bin/python3 - "$work/time" "$json" <<'PY'
import json, re, sys
user, system = map(float, open(sys.argv[1]).read().split()[-2:])
issues = json.load(open(sys.argv[2]))["recordings"][0]["import"]["issues"]
thread = 0.0
for i in issues:
    if i["kind"] == "trackers":
        thread = float(re.search(r"tracker thread CPU ([0-9.]+) s", i["first"]).group(1))
    if i["kind"] == "tracker_unavailable":
        sys.exit("a tracker was unavailable: " + i["first"])
print(f"{user + system:.3f} {thread:.4f}")
PY
}

echo "recording 'sleep $seconds' through the fake NVML (0.1 s sampling), $pairs pairs, alternating"
diffs=()
threads=()
for i in $(seq 1 "$pairs"); do
  read -r base _ < <(measure --no-mlflow)
  read -r with thread < <(measure --mlflow "http://127.0.0.1:$port" --tracker-timeout 30 --tensorboard "$work/tb$i" --name "bench-$i")
  diff=$(/usr/bin/python3 -c "print(f'{100 * ($with - $base) / $seconds:.3f}')")
  diffs+=("$diff")
  threads+=("$(/usr/bin/python3 -c "print(f'{100 * $thread / $seconds:.4f}')")")
  echo "pair $i: recorder CPU ${base} s without trackers, ${with} s with MLflow + TensorBoard:" \
       "difference ${diff} % of a core; tracker thread ${thread} s (${threads[-1]} % of a core)"
done
/usr/bin/python3 - "${diffs[*]}" "${threads[*]}" <<'PY'
import statistics, sys
diffs = [float(x) for x in sys.argv[1].split()]
threads = [float(x) for x in sys.argv[2].split()]
print(f"median: whole recorder {statistics.median(diffs):+.3f} % of a core (noise: the spread of the pairs, "
      f"{min(diffs):.3f} to {max(diffs):.3f}); tracker thread {statistics.median(threads):.4f} % of a core "
      f"(goal < 0.1 %)")
PY
