#!/usr/bin/env bash
# `pip install ./python` works offline (--no-index: pip may fetch nothing) into
# a fresh virtual environment, and the installed package writes markers the
# recorder reads.
#   pip_install_test.sh PYTHON SOURCE_DIR GPUTRIAGE
set -euo pipefail
python=$1 src=$2 gputriage=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
listing() { (cd "$src/python" && find . -path '*/__pycache__' -prune -o -print | sort); }
listing >"$tmp/before"
"$python" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --no-index --no-cache-dir --quiet "$src/python"
where=$(cd "$tmp" && "$tmp/venv/bin/python" -c 'import gputriage; print(gputriage.__file__)')
case "$where" in
  "$tmp/venv/"*) echo "installed: $where" ;;
  *) echo "FAIL: gputriage imported from $where, not the venv"; exit 1 ;;
esac
# The source tree stays clean: the backend builds in a temporary directory.
listing >"$tmp/after"
if ! diff "$tmp/before" "$tmp/after"; then echo "FAIL: pip install left files in $src/python"; exit 1; fi
cd "$tmp"
"$gputriage" record --no-store --json "$tmp/report.json" -- "$tmp/venv/bin/python" -c '
import time, gputriage
assert gputriage.enabled(), "no recorder seen"
for i in range(5):
    with gputriage.step(samples=4):
        time.sleep(0.002)
' 2>"$tmp/record.err" || { cat "$tmp/record.err"; exit 1; }
"$python" - "$tmp/report.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["recordings"][0]["step_markers"]
assert m and m["steps"] + m["warmup_steps"] == 5, m
print("5 steps recorded from the installed package")
PY
"$tmp/venv/bin/pip" uninstall --yes --quiet gputriage
echo "pip install ./python: ok"
