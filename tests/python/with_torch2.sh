#!/usr/bin/env bash
# Runs a zero-code test with PyTorch 2.x from PyPI: the interpreter of the test
# and of every job it records (they run sys.executable).
#   with_torch2.sh VENV_PYTHON TEST.py [unittest names...]
# Exit 77 (ctest: skipped) only where the environment was never made; CI's
# bootstrap makes it, and a venv that cannot import torch 2 fails.
set -euo pipefail
python=$1
shift
if ! [ -x "$python" ]; then
  echo "no $python: scripts/bootstrap.sh makes the PyTorch 2.x environment (tests/requirements-torch2.txt)"
  exit 77
fi
"$python" -c 'import torch, sys; print(f"PyTorch {torch.__version__} ({sys.executable})"); sys.exit(0 if torch.__version__.startswith("2.") else 1)'
exec "$python" "$@"
