#!/usr/bin/env bash
# Load on one run store (issue 12): 8 recorders at once into a store that does
# not exist yet, 1,000 runs in all, while 20 of them are killed with SIGKILL at
# random moments. Afterwards every job that a live recorder started ran, every
# run is listed (complete, or incomplete for a killed recorder), the store passes
# its integrity check, and each run's rows agree with its recorded extent.
set -u
bin=$1
fake_nvml=$2
workers=${3:-8}
runs_each=${4:-125}
kills=${5:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
store=$tmp/new/runs.db  # the directory does not exist either
mkdir -p "$tmp/jobs" "$tmp/results"
fail=0

worker() {  # w: runs_each records, half of the workers sampling the fake NVML
  local w=$1 k name rc nvml
  nvml=/nonexistent/libnvidia-ml.so.1
  [ $((w % 2)) = 0 ] && nvml=$fake_nvml
  for k in $(seq 1 "$runs_each"); do
    name=load-$w-$k
    "$bin" record --store "$store" --nvml-library "$nvml" --interval 0.02 --name "$name" \
      -- sh -c "touch '$tmp/jobs/$name'; sleep 0.$((RANDOM % 3 + 1))" >/dev/null 2>>"$tmp/results/err.$w"
    rc=$?
    echo "$name $rc" >>"$tmp/results/rc.$w"
  done
}

start=$(date +%s.%N)
for w in $(seq 1 "$workers"); do worker "$w" 2>/dev/null & done
RANDOM=12
source "$(dirname "$0")/kill_recorders.sh"
kill_recorders "$store" "$tmp/results" "$kills" 8
wait
end=$(date +%s.%N)

cat "$tmp"/results/rc.* >"$tmp/all_rc"
python3 - "$store" "$tmp/all_rc" "$tmp/jobs" "$((workers * runs_each))" "$kills" "$start" "$end" <<'PY' || fail=1
import os, sqlite3, sys
store, rc_file, jobs, expected, killed, start, end = sys.argv[1:]
expected, killed = int(expected), int(killed)
rcs = dict(line.split() for line in open(rc_file))
assert len(rcs) == expected, (len(rcs), expected)
killed_names = {n for n, rc in rcs.items() if rc == "137"}
assert len(killed_names) >= killed, f"only {len(killed_names)} of {killed} SIGKILLs landed before the load ended"
killed = len(killed_names)
failed = {n: rc for n, rc in rcs.items() if rc not in ("0", "137")}
assert not failed, f"recorders that failed: {list(failed.items())[:5]}"
db = sqlite3.connect(store)
assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "integrity"
runs = {name: (status, code) for name, status, code in db.execute("SELECT name, status, exit_code FROM runs")}
for name, rc in rcs.items():
    ran = os.path.exists(os.path.join(jobs, name))
    if rc == "0":
        assert ran, f"{name}: its recorder ended well but the job never ran"
        assert runs.get(name) == ("complete", 0), (name, runs.get(name))
    elif ran:
        assert name in runs, f"{name}: the job ran but its run is not listed"
        assert runs[name][0] in ("complete", "incomplete"), (name, runs[name])
incomplete = sum(1 for s, _ in runs.values() if s == "incomplete")
metrics = [r[1] for r in db.execute("PRAGMA table_info(samples)") if r[1] not in ("run_id", "device", "t_ns")]
present = " + ".join(f'("{m}" IS NOT NULL)' for m in metrics)
for run, first, last, count in db.execute("SELECT id, first_sample, last_sample, sample_count FROM runs"):
    rows, values = db.execute(f"SELECT count(*), coalesce(sum({present}), 0) FROM samples WHERE run_id=?", (run,)).fetchone()
    if rows:
        inside = db.execute("SELECT count(*) FROM samples WHERE run_id=? AND rowid BETWEEN ? AND ?", (run, first, last)).fetchone()[0]
        assert inside == rows and values == count, (run, rows, inside, values, count)
print(f"ok: {expected} records by {len(set(n.rsplit('-', 1)[0] for n in rcs))} concurrent recorders, {killed} SIGKILLs; "
      f"{len(runs)} runs listed ({incomplete} incomplete); every job of a live recorder ran; "
      f"integrity ok; {float(end) - float(start):.1f} s")
PY
"$bin" runs --check --store "$store" >"$tmp/listed" 2>"$tmp/check" || { echo "FAIL: runs --check"; cat "$tmp/check"; fail=1; }
listed=$(($(wc -l <"$tmp/listed") - 1))
in_db=$(python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM runs").fetchone()[0])' "$store")
[ "$listed" = "$in_db" ] || { echo "FAIL: runs lists $listed of $in_db runs"; fail=1; }
echo "ok: runs --check passes and lists all $listed runs"
exit $fail
