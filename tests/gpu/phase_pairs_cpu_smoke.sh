#!/usr/bin/env bash
# The GPU check's step-phase pairs (tests/gpu/phase_pairs.py), run on the CPU as
# the check records them: both loops of each pair run, and the optimizer's
# figures reach the report (the verdicts are GPU verdicts: silent here).
#   phase_pairs_cpu_smoke.sh GPUTRIAGE PYTHON
set -euo pipefail
bin=$1 python=$2
here=$(dirname "$0")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
unset PYTHONPATH
for v in before after; do
  "$bin" record --no-store --python --json "$out/$v.json" -- "$python" "$here/phase_pairs.py" optimizer "$v" \
    --device cpu --steps 6 2>"$out/$v.txt" || { cat "$out/$v.txt"; exit 1; }
  "$python" "$here/phase_pairs.py" copy "$v" --device cpu --steps 3
done
"$python" - "$out/before.json" "$out/after.json" <<'PY'
import json, sys
before, after = (json.load(open(p))["recordings"][0]["settings"] for p in sys.argv[1:])
# 120 Linear layers: 240 tensors of 128x128 + 128.
expected = {"optimizer.class": "Adam", "optimizer.param_tensors": "240", "optimizer.params": str(120 * (128 * 128 + 128)),
            "optimizer.device": "cpu", "optimizer.implementation": "for-loop"}
got = {k: before.get(k) for k in expected}
assert got == expected, got
# The fixed loop: fused where this release has it for the CPU, else foreach.
assert after.get("optimizer.implementation") in ("fused", "foreach"), after
print("before:", got, "\nafter:", after.get("optimizer.implementation"))
PY
