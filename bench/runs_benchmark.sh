#!/usr/bin/env bash
# Benchmark (not a test): `gputriage runs` on a store of N runs (default 10,000),
# beside the floor measured in the same run: Python's sqlite3 reading the same
# rows (runs, their settings and GPU counts) and doing nothing with them. Prints
# the median of 5 timings of each and their ratio; `runs` should answer in well
# under a second.
#
#   bash bench/runs_benchmark.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10000}
source bench/common.sh
store=$out/runs_${runs}.db
if [ ! -s "$store" ]; then
  # One real recording makes the schema; the rest are copies of it with their
  # own ids, names, settings and times (10,000 real records would take minutes).
  rm -f "$store" "$store-wal" "$store-shm"
  "$bin" record --store "$store" --nvml-library /nonexistent/libnvidia-ml.so.1 --name seed --tag batch=64 -- true 2>/dev/null
  /usr/bin/python3 - "$store" "$runs" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = int(sys.argv[2])
cols = [r[1] for r in db.execute("PRAGMA table_info(runs)") if r[1] != "id"]
seed = db.execute(f"SELECT {', '.join(cols)} FROM runs WHERE id=1").fetchone()
meta = db.execute("SELECT key, value FROM run_metadata WHERE run_id=1").fetchall()
with db:
    for i in range(2, n + 1):
        row = dict(zip(cols, seed))
        row["name"] = f"run-{i}"
        row["started_ns"] = (row["started_ns"] or 0) + i * 60_000_000_000
        cur = db.execute(f"INSERT INTO runs({', '.join(cols)}) VALUES({', '.join('?' * len(cols))})",
                         [row[c] for c in cols])
        db.executemany("INSERT INTO run_metadata(run_id, key, value) VALUES(?, ?, ?)",
                       [(cur.lastrowid, k, v) for k, v in meta])
        db.execute("INSERT INTO devices(run_id, device, gpu_index, uuid, name) VALUES(?, 0, 0, ?, 'NVIDIA H100 80GB HBM3')",
                   (cur.lastrowid, f"GPU-{i}"))
PY
fi
/usr/bin/python3 - "$bin" "$store" "$runs" <<'PY'
import sqlite3, statistics, subprocess, sys, time
bin_, store, n = sys.argv[1], sys.argv[2], int(sys.argv[3])

def ours(*args):
    t = time.perf_counter()
    out = subprocess.run([bin_, "runs", "--store", store, *args], capture_output=True, check=True).stdout
    return time.perf_counter() - t, out

def floor():
    t = time.perf_counter()
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    rows = db.execute("SELECT r.*, (SELECT count(*) FROM devices d WHERE d.run_id = r.id) FROM runs r").fetchall()
    meta = db.execute("SELECT run_id, key, value FROM run_metadata").fetchall()
    db.close()
    return time.perf_counter() - t, len(rows)

table = [ours() for _ in range(5)]
as_json = [ours("--json") for _ in range(5)]
base = [floor() for _ in range(5)]
listed = table[0][1].count(b"\n") - 1
assert listed == n, (listed, n)
t_table = statistics.median(t for t, _ in table)
t_json = statistics.median(t for t, _ in as_json)
t_floor = statistics.median(t for t, _ in base)
print(f"runs on a {n}-run store: table {t_table * 1000:.0f} ms, --json {t_json * 1000:.0f} ms "
      f"(median of 5, process start included); floor (python sqlite3 reading the same rows) {t_floor * 1000:.0f} ms; "
      f"ratio table/floor {t_table / t_floor:.2f}, json/floor {t_json / t_floor:.2f}")
PY
