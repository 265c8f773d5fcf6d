#!/usr/bin/env bash
# Kills the recorder with SIGKILL during a run, 20 times, against the fake NVML
# (then once during a job writing step markers):
# the store must always open, pass SQLite's integrity check, and hold every run
# as complete or incomplete, with the samples written up to about a second
# before the kill.
set -u
bin=$1
fake_nvml=$2
marker_writer=${3:-}
tmp=$(mktemp -d)
trap 'pkill -9 -f "gputriage-crash-marker" 2>/dev/null; rm -rf "$tmp"' EXIT
store=$tmp/runs.db
fail=0
for i in $(seq 1 20); do
  "$bin" record --store "$store" --nvml-library "$fake_nvml" --interval 0.01 --name "crash-$i" \
    -- sh -c "sleep 30; : gputriage-crash-marker" >/dev/null 2>"$tmp/err.$i" &
  rec=$!
  # Kill at a different moment each time: 0.3 s to 1.6 s into the run.
  sleep "$(python3 -c "print(0.3 + ($i * 37 % 14) / 10)")"
  kill -9 "$rec"
  wait "$rec" 2>/dev/null
  pkill -9 -f "gputriage-crash-marker" 2>/dev/null  # the orphaned job
  python3 - "$store" "$i" <<'PY' || fail=1
import sqlite3, sys
path, i = sys.argv[1], int(sys.argv[2])
db = sqlite3.connect(path)
assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "integrity"
runs = db.execute("SELECT id, status FROM runs ORDER BY id").fetchall()
assert len(runs) == i, (len(runs), i)
assert all(s in ("complete", "incomplete") for _, s in runs), runs
assert runs[-1][1] == "incomplete", runs[-1]
PY
done
# Every run opens for diagnosis, and a run killed after its first second kept samples.
python3 - "$store" <<'PY' || fail=1
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
with_samples = db.execute("SELECT count(DISTINCT run_id) FROM samples").fetchone()[0]
assert with_samples >= 10, with_samples
# Each run's rowid extent and value count were committed with its rows: they agree.
metrics = [r[1] for r in db.execute("PRAGMA table_info(samples)") if r[1] not in ("run_id", "device", "t_ns")]
present = " + ".join(f'("{m}" IS NOT NULL)' for m in metrics)
for run, first, last, count in db.execute("SELECT id, first_sample, last_sample, sample_count FROM runs"):
    rows, values = db.execute(f"SELECT count(*), coalesce(sum({present}), 0) FROM samples WHERE run_id=?", (run,)).fetchone()
    inside = db.execute("SELECT count(*) FROM samples WHERE run_id=? AND rowid BETWEEN ? AND ?", (run, first, last)).fetchone()[0]
    assert inside == rows and values == count, (run, rows, inside, values, count)
print(f"ok: 20 SIGKILLs, store consistent, {with_samples} runs kept samples, extents and counts agree")
PY
"$bin" runs --store "$store" >/dev/null || { echo "FAIL: runs"; fail=1; }
"$bin" diagnose --store "$store" 20 >"$tmp/diag" 2>&1 || { echo "FAIL: diagnose an incomplete run"; cat "$tmp/diag"; fail=1; }
grep -q "incomplete_run" "$tmp/diag" || { echo "FAIL: incomplete run not flagged"; fail=1; }
# Step markers are stored as the job runs: a recorder killed 7 s into a job of
# 10 ms steps keeps the steps that ended more than the 5 s hold before its last
# write (about 60 under these phases), each with its data wait, and the job's phases outside
# steps (a 50 ms checkpoint and a 100 ms evaluation every 20 steps: about 20 of
# each in 7 s), which are not held.
if [ -n "$marker_writer" ]; then
  "$bin" record --store "$store" --nvml-library /nonexistent --name steps-crash \
    -- "$marker_writer" 1000 ledger 5 5 >/dev/null 2>"$tmp/err.steps" &
  rec=$!
  sleep 7
  kill -9 "$rec"
  wait "$rec" 2>/dev/null
  pkill -9 -f "marker_writer 1000 ledger 5 5" 2>/dev/null  # the orphaned job (not this script, which names the binary too)
  python3 - "$store" <<'PY' || fail=1
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
run, status = db.execute("SELECT id, status FROM runs WHERE name='steps-crash'").fetchone()
assert status == "incomplete", status
n, short = db.execute("SELECT count(*), sum(data_ns < 5000000) FROM steps WHERE run_id=?", (run,)).fetchone()
assert 20 <= n <= 400, n
assert short == 0, short
phases = dict(db.execute("SELECT phase, count(*) FROM run_phases WHERE run_id=? GROUP BY phase", (run,)).fetchall())
assert phases.get(6, 0) >= 8 and phases.get(8, 0) >= 8, phases  # checkpoint, eval
print(f"ok: a recorder killed mid-job kept {n} steps, each with its data wait, and {phases.get(6)} checkpoints "
      f"and {phases.get(8)} evaluations")
PY
fi
# A normal run after the crashes still completes.
"$bin" record --store "$store" --nvml-library "$fake_nvml" --interval 0.01 -- true >/dev/null 2>&1 || fail=1
"$bin" runs --store "$store" | tail -1 | grep -q complete || { echo "FAIL: run after crashes"; fail=1; }
exit $fail
