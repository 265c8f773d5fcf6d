#!/usr/bin/env bash
# The team store (issue 13): a PostgreSQL server from Debian started here, in a
# temporary directory, then
#  1. the store's own tests against it (postgres_store_test: the same run reads
#     back the same from SQLite and PostgreSQL, migrations racing, foreign
#     tables, passwords never shown, a run of 200,000 rows streamed);
#  2. two "machines" (two recorder loops in two working directories, each with
#     its own tag) recording into one new store at once, while 20 of their
#     recorders are killed with SIGKILL at random moments: every run is listed,
#     complete or incomplete, `runs --check` passes, and each run's rows agree
#     with its recorded extent (checked again here with psql);
#  3. `runs`, `runs --name` and `compare` across the two machines' runs;
#  4. the server restarted under a recording: the run completes and keeps
#     samples from before and after;
#  5. errors that say what is wrong: a wrong password (never printed), no store
#     in the database, a server that is not there.
set -u
bin=$(realpath "$1")
fake_nvml=$(realpath "$2")
store_test=$(realpath "$3")
runs_each=${4:-25}
kills=${5:-20}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
chmod 755 "$tmp"  # the server runs as `postgres` when we are root
server=$tmp/server
trap 'bash "$here/postgres_server.sh" stop "$server"; rm -rf "$tmp"' EXIT
url=$(bash "$here/postgres_server.sh" start "$server") || { echo "FAIL: cannot start PostgreSQL"; exit 1; }
password=$(cat "$server/pw")
psql() { bash "$here/postgres_server.sh" psql "$server" "$1"; }
fail=0

# 1. The store's own tests.
GPUTRIAGE_TEST_POSTGRES_URL=$url "$store_test" --gtest_brief=1 || { echo "FAIL: postgres_store_test"; fail=1; }

# 2. Two machines, one store, 20 SIGKILLs.
team=$url  # the public schema: a new store
mkdir -p "$tmp/results" "$tmp/jobs"
machine() {  # m: runs_each records from its own working directory
  local m=$1 k name rc
  mkdir -p "$tmp/machine-$m"
  cd "$tmp/machine-$m" || exit 1
  for k in $(seq 1 "$runs_each"); do
    name=team-$m-$k
    "$bin" record --store "$team" --nvml-library "$fake_nvml" --interval 0.02 --name team-exp \
      --tag machine="$m" --tag job="$name" \
      -- sh -c "touch '$tmp/jobs/$name'; sleep 1.$((RANDOM % 8 + 1))" >/dev/null 2>>"$tmp/results/err.$m"
    rc=$?
    echo "$name $rc" >>"$tmp/results/rc.$m"
  done
}
start=$(date +%s.%N)
machine 1 2>/dev/null &
machine 2 2>/dev/null &
RANDOM=13
source "$here/kill_recorders.sh"
kill_recorders "$team" "$tmp/results" "$kills" 7
wait
end=$(date +%s.%N)
cat "$tmp"/results/rc.* >"$tmp/all_rc"
landed=$(grep -c ' 137$' "$tmp/all_rc")
others=$(grep -vc ' 0$\| 137$' "$tmp/all_rc")
[ "$landed" -ge "$kills" ] || { echo "FAIL: only $landed of $kills SIGKILLs landed before the load ended"; fail=1; }
[ "$others" = 0 ] || { echo "FAIL: recorders that failed:"; grep -v ' 0$\| 137$' "$tmp/all_rc" | head; tail -n 5 "$tmp"/results/err.*; fail=1; }
# Every recorder that ended well has its run complete; every job that ran is listed.
psql "SELECT r.status || ' ' || coalesce(r.exit_code::text, '-') || ' ' || m.value FROM runs r
      JOIN run_metadata m ON m.run_id = r.id AND m.key = 'tag.job'" | sort >"$tmp/stored"
while read -r name rc; do
  row=$(grep " $name\$" "$tmp/stored")
  if [ "$rc" = 0 ]; then
    [ "$row" = "complete 0 $name" ] || { echo "FAIL: $name ended well but is stored as '$row'"; fail=1; }
  elif [ -e "$tmp/jobs/$name" ] && [ -z "$row" ]; then
    echo "FAIL: $name ran but its run is not listed"; fail=1
  fi
done <"$tmp/all_rc"
incomplete=$(psql "SELECT count(*) FROM runs WHERE status = 'incomplete'")
total=$(psql "SELECT count(*) FROM runs")
# Each run's rows lie inside its id range and add up to its committed value count.
present=$(psql "SELECT string_agg(format('(%I IS NOT NULL)::int', column_name), ' + ') FROM information_schema.columns
                WHERE table_schema = 'public' AND table_name = 'samples' AND column_name NOT IN ('id', 'run_id', 'device', 't_ns')")
bad=$(psql "SELECT count(*) FROM runs r LEFT JOIN (SELECT s.run_id, count(*) n,
            sum((s.id BETWEEN o.first_sample AND o.last_sample)::int) inside, sum($present) vals
            FROM samples s JOIN runs o ON o.id = s.run_id GROUP BY s.run_id) x ON x.run_id = r.id
            WHERE coalesce(x.n, 0) <> coalesce(x.inside, 0) OR coalesce(x.vals, 0) <> r.sample_count")
[ "$bad" = 0 ] || { echo "FAIL: $bad runs whose rows disagree with their extent"; fail=1; }
interleaved=$(psql "SELECT count(*) FROM runs a JOIN runs b ON a.id < b.id AND a.first_sample < b.last_sample
                    AND b.first_sample < a.last_sample AND a.sample_count > 0 AND b.sample_count > 0")
"$bin" runs --check --store "$team" >"$tmp/listed" 2>"$tmp/check" || { echo "FAIL: runs --check"; cat "$tmp/check"; fail=1; }
listed=$(($(wc -l <"$tmp/listed") - 1))
[ "$listed" = "$total" ] || { echo "FAIL: runs lists $listed of $total runs"; fail=1; }
for m in 1 2; do
  n=$(psql "SELECT count(*) FROM run_metadata WHERE key = 'tag.machine' AND value = '$m'")
  [ "$n" -gt 0 ] || { echo "FAIL: no runs of machine $m"; fail=1; }
  cwd=$(psql "SELECT count(DISTINCT m.value) FROM run_metadata m JOIN run_metadata t ON t.run_id = m.run_id
              AND t.key = 'tag.machine' AND t.value = '$m' WHERE m.key = 'cwd'")
  [ "$cwd" = 1 ] || { echo "FAIL: machine $m's runs name $cwd working directories"; fail=1; }
done
echo "ok: 2 machines x $runs_each records into one PostgreSQL store, $landed SIGKILLs; $total runs listed" \
     "($incomplete incomplete), $interleaved pairs of runs written at the same time; runs --check passes;" \
     "extents and counts agree; $(awk "BEGIN { printf \"%.1f\", $end - $start }") s"

# 3. History and compare across the machines.
"$bin" runs --name team-exp --store "$team" >"$tmp/history" 2>&1 || { echo "FAIL: runs --name"; cat "$tmp/history"; fail=1; }
a=$(psql "SELECT min(r.id) FROM runs r JOIN run_metadata m ON m.run_id = r.id AND m.key = 'tag.machine' AND m.value = '1'
          WHERE r.status = 'complete'")
b=$(psql "SELECT min(r.id) FROM runs r JOIN run_metadata m ON m.run_id = r.id AND m.key = 'tag.machine' AND m.value = '2'
          WHERE r.status = 'complete'")
"$bin" compare "$a" "$b" --store "$team" --json >"$tmp/compare.json" 2>"$tmp/compare.err" ||
  { echo "FAIL: compare $a $b"; cat "$tmp/compare.err"; fail=1; }
/usr/bin/python3 - "$tmp/compare.json" <<'PY' || fail=1
import json, sys
c = json.load(open(sys.argv[1]))
changes = {x["key"]: (x["before"], x["after"]) for x in c["config_changes"]}
assert changes.get("tag.machine") == ("1", "2"), changes
print(f"ok: compare across machines names tag.machine 1 -> 2 ({len(changes)} changes)")
PY
k=$(psql "SELECT min(id) FROM runs WHERE status = 'incomplete'")
if [ -n "$k" ]; then
  "$bin" diagnose "$k" --store "$team" >"$tmp/diag" 2>&1
  grep -q incomplete_run "$tmp/diag" || { echo "FAIL: incomplete run $k not flagged"; head "$tmp/diag"; fail=1; }
fi
"$bin" export "$a" --store "$team" -o "$tmp/run.prom" >/dev/null 2>&1 || { echo "FAIL: export"; fail=1; }

# 4. The server restarted under a recording (clients cut off): the recorder
# connects again and the run keeps its samples from both sides.
"$bin" record --store "$team" --nvml-library "$fake_nvml" --interval 0.05 --name restart \
  -- sleep 6 >/dev/null 2>"$tmp/restart.err" &
rec=$!
sleep 2
bash "$here/postgres_server.sh" restart "$server" || { echo "FAIL: restart"; fail=1; }
wait "$rec" || { echo "FAIL: the recorder failed across a server restart"; cat "$tmp/restart.err"; fail=1; }
row=$(psql "SELECT status, (SELECT min(t_ns) FROM samples WHERE run_id = r.id), (SELECT max(t_ns) FROM samples WHERE run_id = r.id),
            started_ns, ended_ns FROM runs r WHERE name = 'restart'")
IFS='|' read -r status first last started ended <<<"$row"
[ "$status" = complete ] || { echo "FAIL: restart run is '$status'"; cat "$tmp/restart.err"; fail=1; }
# Samples within 1.5 s of both ends: kept from before the restart and after it.
if [ "$status" = complete ] && [ $(((first - started) / 1000000)) -lt 1500 ] && [ $(((ended - last) / 1000000)) -lt 1500 ]; then
  echo "ok: server restarted 2 s into a 6 s run; the run is complete with samples from $(((first - started) / 1000000)) ms" \
       "after its start to $(((ended - last) / 1000000)) ms before its end"
else
  echo "FAIL: restart run samples span $first..$last of $started..$ended"; fail=1
fi

# 5. Errors that say what is wrong, without the password.
port=$(cat "$server/port")
"$bin" runs --store "postgresql://gputriage:wrong-$password@127.0.0.1:$port/team" >/dev/null 2>"$tmp/e1" && fail=1
grep -q "password authentication failed" "$tmp/e1" || { echo "FAIL: wrong password message"; cat "$tmp/e1"; fail=1; }
grep -q -- "$password" "$tmp/e1" && { echo "FAIL: the password is printed"; fail=1; }
"$bin" runs --store "${url%/team}/postgres" >/dev/null 2>"$tmp/e2" && fail=1
grep -q "there is no run store in this database" "$tmp/e2" || { echo "FAIL: empty database message"; cat "$tmp/e2"; fail=1; }
grep -q -- "$password" "$tmp/e2" && { echo "FAIL: the password is printed"; fail=1; }
"$bin" record --store "postgresql://gputriage:$password@127.0.0.1:1/team" -- true >/dev/null 2>"$tmp/e3"
grep -q "cannot connect to the run store" "$tmp/e3" || { echo "FAIL: no server message"; cat "$tmp/e3"; fail=1; }
grep -q -- "$password" "$tmp/e3" && { echo "FAIL: the password is printed"; fail=1; }
[ $fail = 0 ] && echo "ok: wrong password, empty database and absent server are named, the password never printed"

# 6. libpq is loaded at run time: a machine without it is told how to get it,
# and the job still runs (its report says the run was not kept).
rc=0
GPUTRIAGE_LIBPQ=$tmp/no-such-libpq.so.5 "$bin" runs --store "$url" >/dev/null 2>"$tmp/e4" || rc=$?
if [ "$rc" = 0 ] || ! grep -q "a PostgreSQL store needs libpq" "$tmp/e4" || ! grep -q "apt-get install libpq5" "$tmp/e4"; then
  echo "FAIL: runs without libpq (exit $rc)"; cat "$tmp/e4"; fail=1
fi
rc=0
GPUTRIAGE_LIBPQ=$tmp/no-such-libpq.so.5 "$bin" record --no-mlflow --store "$url" -- sh -c 'exit 7' >/dev/null 2>"$tmp/e5" || rc=$?
if [ "$rc" != 7 ] || ! grep -q "a PostgreSQL store needs libpq" "$tmp/e5"; then
  echo "FAIL: record without libpq (exit $rc, the job's was 7)"; cat "$tmp/e5"; fail=1
fi
[ $fail = 0 ] && echo "ok: without libpq, runs and record say how to install it; the job's exit code is kept"
exit $fail
