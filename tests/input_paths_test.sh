#!/usr/bin/env bash
# How inputs reach the readers: directories read for what they hold, standard
# input, pipes, FIFOs and process substitution read once and whole, byte-order
# marks and UTF-16 text decoded (issue 12, items 1, 6 and 15).
set -u
bin=$1
data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GPUTRIAGE_STORE=$tmp/runs.db
fail=0
check() {  # description, expected exit code, command...
  local what=$1 want=$2; shift 2
  timeout 120 "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: $what: exit $got, expected $want"; cat "$tmp/err"; fail=1
  else
    echo "ok: $what"
  fi
}
field() {  # the summary field $1 of the JSON report in $tmp/out
  python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["summary"][sys.argv[2]]; print(round(v, 2) if isinstance(v, float) else v)' "$tmp/out" "$1"
}
same() {  # description, expected, got
  if [ "$2" != "$3" ]; then echo "FAIL: $1: $3, expected $2"; fail=1; else echo "ok: $1 ($3)"; fi
}
nw0=$data/traces/kineto-resnet50-v100/num_workers_0.pt.trace.json.gz

# --- directories --------------------------------------------------------------
# A TensorBoard profiler log directory: the trace lies three levels down beside
# TensorBoard's own files; once it was read as dcgm-exporter scrapes and judged
# an all-clear.
mkdir -p "$tmp/tb/plugins/profile/2026_11_30"
cp "$nw0" "$tmp/tb/plugins/profile/2026_11_30/host_123.pt.trace.json.gz"
printf 'binary\0\1\2' >"$tmp/tb/events.out.tfevents.1700000000.host"
echo '{"embeddings": []}' >"$tmp/tb/projector_config.json"
check "a profiler log directory is read for its trace" 0 "$bin" diagnose --json "$tmp/tb"
same "its GPU busy share is the trace's" 55.51 "$(field gpu_busy_percent)"
grep -q '"verdict": "input_bound"' "$tmp/out" || { echo "FAIL: no input_bound from the directory"; fail=1; }
grep -q 'directory_files_skipped' "$tmp/out" || { echo "FAIL: the skipped files are not named"; fail=1; }

mkdir -p "$tmp/junk"
echo 'hello' >"$tmp/junk/notes.txt"
echo '{"lr": 0.1}' >"$tmp/junk/config.json"
check "a directory with no GPU input is an error, not an all-clear" 3 "$bin" diagnose "$tmp/junk"
grep -q "no PyTorch profiler trace or GPU metric log" "$tmp/err" || { echo "FAIL: unclear message"; cat "$tmp/err"; fail=1; }

check "diagnose / stops with a clear error" 3 "$bin" diagnose /
grep -q "name the run's own directory" "$tmp/err" || { echo "FAIL: diagnose / message"; cat "$tmp/err"; fail=1; }

mkdir -p "$tmp/scrapes"
i=0
for f in "$data"/metrics/dcgm-exporter/*; do cp "$f" "$tmp/scrapes/scrape_$i.prom"; i=$((i + 1)); done
check "a directory of dcgm-exporter scrapes is still one series" 0 "$bin" diagnose --json "$tmp/scrapes"


check "a trace forced as dcgm-exporter is refused, not judged" 3 "$bin" diagnose --format dcgm-exporter "$nw0"
grep -q "could not be read as dcgm-exporter" "$tmp/err" || { echo "FAIL: misread message"; cat "$tmp/err"; fail=1; }

# --- standard input, pipes, FIFOs ----------------------------------------------
# A log over the 64 KiB detection head: 2 of every 7 seconds idle, the rest at 90 %.
python3 - "$tmp/log.csv" <<'PY'
import datetime, sys
t = datetime.datetime(2026, 11, 1, 10, 0, 0)
rows = ["timestamp, name, pci.bus_id, utilization.gpu [%], power.draw [W]"]
for i in range(3000):
    u = 0 if i % 7 < 2 else 90
    ts = (t + datetime.timedelta(seconds=i)).strftime("%Y/%m/%d %H:%M:%S.000")
    rows.append(f"{ts}, NVIDIA H100 80GB HBM3, 00000000:18:00.0, {u} %, {100 + 5 * u:.2f} W")
open(sys.argv[1], "w").write("\n".join(rows) + "\n")
open(sys.argv[1] + ".utf16", "wb").write(("\ufeff" + "\r\n".join(rows) + "\r\n").encode("utf-16-le"))
open(sys.argv[1] + ".utf16-nobom", "wb").write(("\r\n".join(rows) + "\r\n").encode("utf-16-le"))
open(sys.argv[1] + ".utf16be", "wb").write(("\ufeff" + "\n".join(rows) + "\n").encode("utf-16-be"))
PY
check "a log from a file" 0 "$bin" diagnose --json "$tmp/log.csv"
want_busy=$(field gpu_busy_percent)
want_hours=$(field gpu_hours)
check "process substitution" 0 bash -c '"$0" diagnose --json <(cat "$1")' "$bin" "$tmp/log.csv"
same "process substitution keeps the detection head" "$want_busy" "$(field gpu_busy_percent)"
same "process substitution keeps every row" "$want_hours" "$(field gpu_hours)"
check "- is standard input" 0 bash -c '"$0" diagnose --json - <"$1"' "$bin" "$tmp/log.csv"
same "standard input reads it all" "$want_hours" "$(field gpu_hours)"
gzip -c "$tmp/log.csv" >"$tmp/log.csv.gz"
check "zcat | diagnose /dev/stdin" 0 bash -c 'cat "$1" | "$0" diagnose --json /dev/stdin' "$bin" "$tmp/log.csv.gz"
same "a gzip pipe reads it all" "$want_hours" "$(field gpu_hours)"
mkfifo "$tmp/fifo"
(cat "$tmp/log.csv" >"$tmp/fifo" &)
check "a FIFO is read once, without hanging" 0 "$bin" diagnose --json "$tmp/fifo"
same "a FIFO reads it all" "$want_hours" "$(field gpu_hours)"
check "a trace through standard input" 0 bash -c '"$0" diagnose --json - <"$1"' "$bin" "$nw0"
same "a piped trace" 55.51 "$(field gpu_busy_percent)"

mkdir -p "$tmp/mixed"
cp "$nw0" "$tmp/mixed/trace.json.gz"
cp "$tmp/log.csv" "$tmp/mixed/smi.csv"
check "a directory with a trace and a metric log reads both" 0 "$bin" diagnose --json "$tmp/mixed"
same "both recordings" 2 "$(field recordings)"

# --- encodings ----------------------------------------------------------------
for enc in utf16 utf16-nobom utf16be; do
  check "a $enc CSV (PowerShell redirect) is read" 0 "$bin" diagnose --json "$tmp/log.csv.$enc"
  same "the $enc CSV gives the same hours" "$want_hours" "$(field gpu_hours)"
  same "the $enc CSV gives the same busy share" "$want_busy" "$(field gpu_busy_percent)"
done
{ printf '\xef\xbb\xbf'; gzip -dc "$nw0"; } >"$tmp/bom.json"
check "a trace starting with a byte-order mark is read" 0 "$bin" diagnose --json "$tmp/bom.json"
same "the BOM trace" 55.51 "$(field gpu_busy_percent)"

# --- progress on a terminal (item 16) -------------------------------------------
# A long read shows a progress line on stderr when it is a terminal, and nothing
# when stderr is a pipe or the report is --json.
python3 - "$tmp/big.csv" <<'PY'
import sys
rows = ["timestamp, name, pci.bus_id, utilization.gpu [%], power.draw [W]"]
line = "2026/11/01 10:{:02d}:{:02d}.{:03d}, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 50 %, 300.00 W"
with open(sys.argv[1], "w") as f:
    f.write(rows[0] + "\n")
    for i in range(400000):
        f.write(line.format(i // 60000 % 60, i // 1000 % 60, i % 1000) + "\n")
PY
slow_feed() { head -c 20000000 "$tmp/big.csv"; sleep 2; tail -c +20000001 "$tmp/big.csv"; }
if command -v script >/dev/null; then
  script -qec "bash -c 'head -c 20000000 \"$tmp/big.csv\"; sleep 2; tail -c +20000001 \"$tmp/big.csv\"' | '$bin' diagnose - >/dev/null" /dev/null >"$tmp/tty.txt" 2>&1
  grep -q "reading standard input" "$tmp/tty.txt" || { echo "FAIL: no progress line on a terminal"; cat -v "$tmp/tty.txt" | head -5; fail=1; }
  echo "ok: progress shown on a terminal"
  script -qec "bash -c 'head -c 20000000 \"$tmp/big.csv\"; sleep 2; tail -c +20000001 \"$tmp/big.csv\"' | '$bin' diagnose --json - >/dev/null" /dev/null >"$tmp/tty_json.txt" 2>&1
  grep -q "reading" "$tmp/tty_json.txt" && { echo "FAIL: progress with --json"; fail=1; }
  echo "ok: no progress with --json"
fi
slow_feed | "$bin" diagnose - >/dev/null 2>"$tmp/piped_err.txt"
grep -q "reading" "$tmp/piped_err.txt" && { echo "FAIL: progress written to a pipe"; fail=1; }
echo "ok: no progress when stderr is not a terminal"

# --- nothing read, nothing judged (issue 41) ------------------------------------
# A header and no rows, a row of N/A, an empty trace: each an error that says what
# was missing (a --fail-on gate once passed on them with "no rule crossed").
printf 'timestamp, index, utilization.gpu [%%], power.draw [W]\n' >"$tmp/header_only.csv"
check "a metric log with a header and no rows is an input error" 3 "$bin" diagnose --fail-on low "$tmp/header_only.csv"
grep -q "header_only.csv: nvidia-smi-csv with no readings (a header and no rows)" "$tmp/err" ||
  { echo "FAIL: the error does not say the log has no rows"; cat "$tmp/err"; fail=1; }
printf 'timestamp, index, utilization.gpu [%%]\n2026/01/01 00:00:00.000, 0, [N/A]\n' >"$tmp/na_only.csv"
check "a metric log whose every value is N/A is an input error" 3 "$bin" diagnose "$tmp/na_only.csv"
grep -q "every value empty, N/A or unsupported" "$tmp/err" || { echo "FAIL: no reason for the N/A log"; cat "$tmp/err"; fail=1; }
echo '{"traceEvents": []}' >"$tmp/empty_trace.json"
check "a trace with no events is an input error" 3 "$bin" diagnose "$tmp/empty_trace.json"
grep -q "a trace with no events" "$tmp/err" || { echo "FAIL: no reason for the empty trace"; cat "$tmp/err"; fail=1; }
# A trace cut short (issue 41): judged only on the steps whose device work it holds
# whole, every verdict saying so, and a note at the top; cut before one whole step,
# no verdict about the GPU at all (the half file once gave launch_bound high, +84 %).
size=$(stat -c %s "$nw0")
head -c $((size / 2)) "$nw0" >"$tmp/half.json.gz"
check "a trace cut in half is read" 0 "$bin" diagnose --json "$tmp/half.json.gz"
/usr/bin/python3 - "$tmp/out" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
notes = " ".join(r.get("notes", []))
assert "is cut off" in notes, notes
assert not [f for f in r["findings"] if f["origin"] == "trace"], [f["verdict"] for f in r["findings"]]
print("ok: the half trace draws no device verdict and says why")
PY
head -c $((size * 9 / 10)) "$nw0" >"$tmp/most.json.gz"
check "a trace cut near its end is read" 0 "$bin" diagnose --json "$tmp/most.json.gz"
/usr/bin/python3 - "$tmp/out" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
trace = [f for f in r["findings"] if f["origin"] == "trace"]
assert trace, "no verdict from the steps held whole"
assert all("The trace file is cut off: judged on the" in f["detail"] for f in trace), [f["detail"][-200:] for f in trace]
print(f"ok: the cut trace's {len(trace)} verdicts each say they come from the steps held whole")
PY

# Errors are plain messages, without a status code in front of them.
check "a missing file is an input error" 3 "$bin" diagnose "$tmp/does_not_exist.json"
if grep -qE "error: (not_found|invalid_argument|data_loss|unimplemented|internal):" "$tmp/err"; then
  echo "FAIL: the error carries a status code prefix"; cat "$tmp/err"; fail=1
else
  echo "ok: the error is a plain message"
fi

exit $fail
