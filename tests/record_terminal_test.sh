#!/usr/bin/env bash
# `gputriage record` on a terminal (ctest record_terminal_tmux), under tmux: a job
# that prints 80 lines while it runs, recorded with --live (the step screen) and
# without (the one-line status) on a fake GPU. Every line the job printed is in
# the pane afterwards, whole and in order: the screen and the status line are
# drawn in a footer below the job's output, never over it or beside it (issue 41).
#   record_terminal_test.sh GPUTRIAGE FAKE_NVML
set -u
bin=$1
fake_nvml=$2
tmp=$(mktemp -d)
session=gputriage-record-$$
cleanup() {
  tmux kill-session -t "$session" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
cat >"$tmp/scenario" <<'EOT'
device name="NVIDIA H100 80GB HBM3" uuid=GPU-rec0 bus=00000000:18:00.0 power_limit_w=700 max_sm_mhz=1980
series gpu_util 97 95 0 0 96 98 0 0
series power_w 520 540 110 100 530 525 105 100
EOT
cat >"$tmp/job.sh" <<'EOT'
#!/bin/sh
# A job's own output: a line now and then, some longer than others, one written in pieces.
i=1
while [ $i -le 80 ]; do
  if [ $((i % 10)) -eq 0 ]; then printf 'job line %d of 80, ' "$i"; sleep 0.02; printf 'written in two pieces\n'
  else echo "job line $i of 80"; fi
  i=$((i + 1))
  sleep 0.04
done
EOT
chmod +x "$tmp/job.sh"

check_pane() {  # MODE: every job line whole, in order, once
  local mode=$1
  tmux capture-pane -p -J -S - -E - -t "$session" >"$tmp/pane_$mode.txt"
  /usr/bin/python3 - "$tmp/pane_$mode.txt" "$mode" <<'PY'
import re, sys
path, mode = sys.argv[1], sys.argv[2]
lines = [l.rstrip() for l in open(path, encoding="utf-8", errors="replace")]
want = [f"job line {i} of 80" + (", written in two pieces" if i % 10 == 0 else "") for i in range(1, 81)]
found = [l for l in lines if "job line" in l]
bad = [l for l in found if l not in want]
missing = [w for w in want if w not in found]
order = [want.index(l) for l in found if l in want]
problems = []
if missing: problems.append(f"{len(missing)} job lines missing (first: {missing[0]!r})")
if bad: problems.append(f"{len(bad)} job lines damaged or joined (first: {bad[0]!r})")
if order != sorted(order): problems.append("job lines out of order")
if len(found) != len(set(found)): problems.append("a job line shown twice")
if problems:
    print(f"FAIL: record {mode}: " + "; ".join(problems))
    print("\n".join(lines[-60:]))
    sys.exit(1)
print(f"ok: record {mode}: all 80 job lines whole and in order in the pane")
PY
}

run_in_tmux() {  # MODE ARGS...: record the job in a fresh 100x30 pane; wait for it to end
  local mode=$1
  shift
  tmux kill-session -t "$session" 2>/dev/null
  rm -f "$tmp/rc"
  tmux -u new-session -d -s "$session" -x 100 -y 30 \
    "env LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=tmux-256color GPUTRIAGE_FAKE_NVML_SCENARIO=$tmp/scenario $bin record --nvml-library $fake_nvml --no-store --interval 0.1 $* -- $tmp/job.sh; echo \$? >$tmp/rc; sleep 600"
  for _ in $(seq 1 300); do
    [ -s "$tmp/rc" ] && break
    sleep 0.1
  done
  if [ "$(cat "$tmp/rc" 2>/dev/null)" != "0" ]; then
    echo "FAIL: record $mode exited $(cat "$tmp/rc" 2>/dev/null || echo '(still running)')"
    tmux capture-pane -p -S - -t "$session" | tail -30
    fail=1
    return
  fi
  check_pane "$mode" || fail=1
}

run_in_tmux live --live
# The footer is gone once the job ends: the report follows the job's lines.
grep -q "gputriage diagnosis" "$tmp/pane_live.txt" || { echo "FAIL: record --live printed no report"; fail=1; }
run_in_tmux status
grep -q "\[gputriage\] [0-9][0-9]:[0-9][0-9].*job line" "$tmp/pane_status.txt" &&
  { echo "FAIL: the status line ran into the job's output"; fail=1; }
exit $fail
