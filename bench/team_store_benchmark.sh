#!/usr/bin/env bash
# Benchmark (not a test): the PostgreSQL team store against the SQLite store,
# measured in the same run with the same recordings.
#  * Writing: CPU the recorder spends over S seconds at 100 Hz x 8 fake GPUs
#    with each store, less the same command with --no-store (the baseline: NVML
#    sampling, the sketches, the report), plus for PostgreSQL the CPU its server
#    processes spent meanwhile; the store's share is scaled to the
#    default 10 Hz and to one core. Goal: the team store's writes stay within
#    a few times SQLite's and well under 1 % of a core at 10 Hz x 8 GPUs.
#  * Reading: `diagnose RUN_ID` of the recorded run (median of 5) from each
#    store, and the floor for PostgreSQL: psql reading the same sample rows and
#    discarding them.
# A PostgreSQL server is started in a temporary directory (tests/postgres_server.sh).
#
#   bash bench/team_store_benchmark.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
bin=build/release/src/cli/gputriage
fake=build/release/fake_nvml/libnvidia-ml.so.1
[ -x "$bin" ] && [ -f "$fake" ] || { cmake --preset release >/dev/null && cmake --build --preset release --target gputriage fake_nvml; }
out=$(realpath -m "${BENCH_DIR:-bench/out}")
mkdir -p "$out"
server=$(mktemp -d)
chmod 755 "$server"
trap 'bash tests/postgres_server.sh stop "$server/pg"; rm -rf "$server"' EXIT
url=$(bash tests/postgres_server.sh start "$server/pg")
scenario=$out/team_store_gpus.txt
source bench/eight_gpus.sh
write_eight_gpus "$scenario"
measure() {  # command... -> "user_s sys_s"
  /usr/bin/time -f "%U %S" -o "$out/time.txt" "$@" >/dev/null 2>&1
  cat "$out/time.txt"
}
rm -f "$out"/team_store.db*
record() {  # STORE_FLAGS...
  GPUTRIAGE_FAKE_NVML_SCENARIO="$scenario" measure "$bin" record "$@" --nvml-library "$fake" --interval 0.01 \
    --name team-bench -- sleep "$seconds"
}
# The server's CPU counts as the team store's too: the postmaster, its live
# processes, and the backends that have exited (reaped into its children's times).
server_cpu() {
  /usr/bin/python3 - "$(head -1 "$server/pg/data/postmaster.pid")" <<'PY'
import os, sys
pm = sys.argv[1]
tick = os.sysconf("SC_CLK_TCK")
def fields(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()
total = sum(int(x) for x in fields(pm)[11:15])  # utime stime cutime cstime
for pid in os.listdir("/proc"):
    if pid.isdigit() and pid != pm:
        try:
            f = fields(pid)
        except OSError:
            continue
        if f[1] == pm:
            total += int(f[11]) + int(f[12])
print(total / tick)
PY
}
idle_before=$(server_cpu)  # the server's own background work, while the recorder keeps no store
read -r none_u none_s < <(record --no-store)
idle_after=$(server_cpu)
read -r lite_u lite_s < <(record --store "$out/team_store.db")
server_before=$(server_cpu)
read -r pg_u pg_s < <(record --store "$url")
server_after=$(server_cpu)
rows=$(bash tests/postgres_server.sh psql "$server/pg" "SELECT count(*) FROM samples WHERE run_id = 1")
/usr/bin/python3 - "$bin" "$out/team_store.db" "$url" "$server/pg" "$rows" "$seconds" \
  "$none_u" "$none_s" "$lite_u" "$lite_s" "$pg_u" "$pg_s" "$server_before" "$server_after" "$idle_before" "$idle_after" <<'PY'
import statistics, subprocess, sys, time
bin_, lite, url, pgdir, rows, seconds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6])
none, lite_cpu, pg_cpu = (float(sys.argv[i]) + float(sys.argv[i + 1]) for i in (7, 9, 11))
idle = float(sys.argv[16]) - float(sys.argv[15])
server = max(float(sys.argv[14]) - float(sys.argv[13]) - idle, 0)

def timed(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=True)
    return time.perf_counter() - t

def median(cmd):
    return statistics.median(timed(cmd) for _ in range(5))

lite_cost, pg_cost = max(lite_cpu - none, 1e-4), max(pg_cpu - none, 0) + server
scale = 10 / 100  # recorded at 100 Hz, judged at the default 10 Hz
print(f"writing, {seconds:g} s at 100 Hz x 8 GPUs ({rows} sample rows): recorder CPU {none:.3f} s without a store,"
      f" {lite_cpu:.3f} s with SQLite, {pg_cpu:.3f} s with PostgreSQL (+ {server:.3f} s in the server's processes beyond their {idle:.3f} s idle)")
print(f"  the store's cost (recorder, and server for PostgreSQL): SQLite {lite_cost / seconds * 100:.2f} %, PostgreSQL {pg_cost / seconds * 100:.2f} % of one core"
      f" at 100 Hz (ratio {pg_cost / lite_cost:.2f}); at 10 Hz x 8 GPUs about {lite_cost / seconds * scale * 100:.3f} %"
      f" and {pg_cost / seconds * scale * 100:.3f} %")
lite_read = median([bin_, "diagnose", "1", "--store", lite])
pg_read = median([bin_, "diagnose", "1", "--store", url])
floor = median(["bash", "tests/postgres_server.sh", "psql", pgdir, "SELECT * FROM samples WHERE run_id = 1"])
print(f"reading, diagnose of the run (median of 5): SQLite {lite_read * 1e3:.0f} ms, PostgreSQL {pg_read * 1e3:.0f} ms"
      f" (ratio {pg_read / lite_read:.2f}); psql reading the same rows {floor * 1e3:.0f} ms (ours / psql {pg_read / floor:.2f})")
PY
