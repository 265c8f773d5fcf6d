#!/bin/bash
# Runs inside a clean system's root (tests/wheel/clean_system_test.sh), with no
# network but loopback: installs the wheel into a fresh venv offline and runs the
# product from it. Outputs go to /tmp/gputriage-test/out.
#   inside_test.sh WHEEL
set -euo pipefail
t=/tmp/gputriage-test
venv=/opt/gputriage-venv
rm -rf "$venv"
python3 -m venv "$venv"
# A pip older than 20.3 (Ubuntu 20.04's 20.0.2) does not know the manylinux_2_28
# tag: it refuses the wheel, and README's one command first (`python3 -m pip
# install --upgrade pip`, here from the pinned pip wheel beside it: no network).
pip_version=$("$venv/bin/python" -c 'import pip; print(pip.__version__)')
if "$venv/bin/python" -c 'import sys; v = tuple(int(p) for p in sys.argv[1].split(".")[:2]); sys.exit(0 if v < (20, 3) else 1)' "$pip_version"; then
  if "$venv/bin/pip" install --no-index --no-cache-dir --quiet "$1" >"$t/out/old_pip.txt" 2>&1; then
    echo "FAIL: pip $pip_version installed a manylinux_2_28 wheel: README says it refuses it"; exit 1
  fi
  grep -q "is not a supported wheel on this platform" "$t/out/old_pip.txt" ||
    { cat "$t/out/old_pip.txt"; echo "FAIL: pip $pip_version refused the wheel for another reason"; exit 1; }
  "$venv/bin/python" -m pip install --no-index --quiet --upgrade "$t"/pip-*.whl
  echo "ok: pip $pip_version refuses the wheel as README says; upgraded to $("$venv/bin/python" -c 'import pip; print(pip.__version__)')"
fi
"$venv/bin/pip" install --no-index --no-cache-dir --quiet "$1"
g=$venv/bin/gputriage
"$g" --version | tee "$t/out/version.txt"
grep -q "manylinux_2_28" "$t/out/version.txt"

# diagnose, every bundled input (compared outside with the source build's JSON).
cd "$t/data"
while read -r f; do
  mkdir -p "$t/out/$(dirname "$f")"
  rc=0
  "$g" diagnose "$f" --json --color never >"$t/out/$f.json" 2>/dev/null || rc=$?
  echo "$rc" >"$t/out/$f.rc"
done <"$t/inputs.txt"
echo "ok: diagnose ran on $(wc -l <"$t/inputs.txt") inputs"

# record --python with the system's Python, not the venv's: the package loads
# from the wheel's install through the recorder's sitecustomize alone.
cd "$t"
"$g" record --python --no-mlflow --store "$t/runs.db" --name wheel-loop --json "$t/out/record.json" \
  -- /usr/bin/python3 "$t/marked_loop.py" >"$t/out/record.txt" 2>&1 || { cat "$t/out/record.txt"; exit 1; }
python3 "$t/check_marked_loop.py" "$t/out/record.json" "record --python"

# serve: its API lists the run just recorded.
"$g" serve --store "$t/runs.db" --listen 127.0.0.1:18765 >"$t/out/serve.txt" 2>&1 &
serve=$!
python3 "$t/http_get.py" "http://127.0.0.1:18765/api/runs" >"$t/out/runs.json"
kill "$serve"; wait "$serve" || true
python3 - "$t/out/runs.json" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
assert [r["name"] for r in runs] == ["wheel-loop"], runs
print("ok: serve: /api/runs lists the recorded run")
PY

# agent: /metrics from the fake NVML (one healthy GPU).
"$g" agent --listen 127.0.0.1:19401 --nvml-library "$t/libnvidia-ml.so.1" --interval 0.1 --window 2 --judge-every 0.5 \
  >"$t/out/agent.txt" 2>&1 &
agent=$!
sleep 2
python3 "$t/http_get.py" "http://127.0.0.1:19401/metrics" >"$t/out/metrics.txt"
kill "$agent"; wait "$agent" || true
grep -q '^gputriage_gpu_utilization_percent' "$t/out/metrics.txt" || { head -40 "$t/out/metrics.txt"; exit 1; }
echo "ok: agent: /metrics from the fake NVML ($(grep -c '^gputriage_' "$t/out/metrics.txt") gputriage_ samples)"

# top --once, no terminal.
"$g" top --once --nvml-library "$t/libnvidia-ml.so.1" --interval 0.1 --window 1 --judge-every 0.3 >"$t/out/top.txt" 2>&1 ||
  { cat "$t/out/top.txt"; exit 1; }
grep -q "GPU" "$t/out/top.txt" || { cat "$t/out/top.txt"; exit 1; }
echo "ok: top --once: $(wc -l <"$t/out/top.txt") lines"
