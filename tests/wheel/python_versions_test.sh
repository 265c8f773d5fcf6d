#!/usr/bin/env bash
# One wheel, every CPython from 3.8: for each of 3.8-3.13 found on this machine
# (pyenv's, or python3.X on PATH), a fresh venv gets the wheel offline, and
# `gputriage record --python` runs tests/wheel/marked_loop.py with that venv's
# interpreter: the limited-API extension imports, its markers reach the
# recorder (40 steps), and the run is judged input-bound. Versions not found are
# named, not passed over in silence.
#   python_versions_test.sh WHEEL
set -euo pipefail
wheel=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tested=() missing=()
for minor in 8 9 10 11 12 13; do
  python=""
  for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3."$minor".*/bin/python3 "$(command -v python3."$minor" || true)"; do
    [ -n "$candidate" ] && [ -x "$candidate" ] && python=$candidate && break
  done
  if [ -z "$python" ]; then missing+=("3.$minor"); continue; fi
  venv=$tmp/venv-3.$minor
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --no-index --no-cache-dir --quiet --disable-pip-version-check "$wheel"
  (cd "$tmp" && "$venv/bin/gputriage" record --python --no-store --no-mlflow --json "$tmp/3.$minor.json" \
     -- "$venv/bin/python" "$root/tests/wheel/marked_loop.py" >"$tmp/3.$minor.log" 2>&1) ||
    { cat "$tmp/3.$minor.log"; echo "FAIL: CPython 3.$minor"; exit 1; }
  "$venv/bin/python" "$root/tests/wheel/check_marked_loop.py" "$tmp/3.$minor.json" \
    "CPython $("$venv/bin/python" -c 'import platform; print(platform.python_version())'): the wheel's markers"
  tested+=("3.$minor")
done
echo "python_versions: tested ${tested[*]:-none}; not on this machine: ${missing[*]:-none}"
[ "${#tested[@]}" -gt 0 ]
