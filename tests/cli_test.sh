#!/usr/bin/env bash
# End-to-end checks of the gputriage CLI: exit codes, JSON shape, clear errors.
set -u
bin=$1
data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # description, expected exit code, command...
  local what=$1 want=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: $what: exit $got, expected $want"; cat "$tmp/err"; fail=1
  else
    echo "ok: $what"
  fi
}
nw0=$data/traces/kineto-resnet50-v100/num_workers_0.pt.trace.json.gz

check "diagnose a real trace" 0 "$bin" diagnose "$nw0"
grep -q "input_bound" "$tmp/out" || { echo "FAIL: no input_bound verdict in the report"; fail=1; }
grep -q $'\033\[' "$tmp/out" && { echo "FAIL: colour codes written to a non-TTY"; fail=1; }

check "json report" 0 "$bin" diagnose --json "$nw0"
python3 - "$tmp/out" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "gputriage.report" and d["schema_version"] == 1
s = d["summary"]
for k in ("gpu_busy_percent", "data_wait_percent", "avg_step_ms"):
    assert isinstance(s[k], (int, float)), k
assert abs(s["gpu_busy_percent"] - 55.51) < 0.5, s
verdicts = {f["verdict"]: f for f in d["findings"]}
assert verdicts["input_bound"]["severity"] == "high"
assert verdicts["low_precision"]["severity"] == "high"
for f in d["findings"]:
    assert f["evidence"] and all("value" in e and "unit" in e for e in f["evidence"])
print("ok: json shape")
PY

check "--fail-on high exits 1 when a high finding exists" 1 "$bin" diagnose --fail-on high "$nw0"
check "missing file" 3 "$bin" diagnose "$tmp/nope.json"
grep -q "nope.json" "$tmp/err" || { echo "FAIL: error does not name the file"; fail=1; }
printf 'a,b\n1,2\n' > "$tmp/metrics.csv"
check "wrong format" 3 "$bin" diagnose "$tmp/metrics.csv"
grep -q "not a recognised input" "$tmp/err" || { echo "FAIL: wrong-format message"; cat "$tmp/err"; fail=1; }
: > "$tmp/empty.json"
check "empty file" 3 "$bin" diagnose "$tmp/empty.json"
zcat "$nw0" | head -c 5000000 > "$tmp/truncated.json"
check "truncated trace imports what is complete" 0 "$bin" diagnose "$tmp/truncated.json"
grep -q "truncated\|not closed\|ends inside" "$tmp/err" || { echo "FAIL: truncation not stated"; cat "$tmp/err"; fail=1; }
check "bad flag" 2 "$bin" diagnose --colour=pink "$nw0"
check "no subcommand" 2 "$bin"
exit $fail
