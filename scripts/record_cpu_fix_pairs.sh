#!/usr/bin/env bash
# Records the CPU before/after pairs of fixes other than loader workers into a run
# store (tests/data/gains/cpu_fixes.db), with `gputriage record --python` (zero-code
# step markers) around tests/python/fix_pairs_loop.py on PyTorch from Debian
# (/usr/bin/python3). Each fix is applied for real between two runs of the same loop:
#   run 1 -> 2  activation checkpointing removed            (recompute_overhead's gain)
#   run 2 -> 3  bf16 autocast on the CPU                    (no finding: checks the silence)
#   run 4 -> 5  Adam's per-tensor loop -> its foreach form  (no finding on a CPU)
#   run 6 -> 7  a CNN in channels_last                      (no finding on a CPU)
# Usage: scripts/record_cpu_fix_pairs.sh [store path] [path/to/gputriage]
set -euo pipefail
cd "$(dirname "$0")/.."
store=${1:-tests/data/gains/cpu_fixes.db}
bin=${2:-build/release/src/cli/gputriage}
[ -x "$bin" ] || { echo "record_cpu_fix_pairs: $bin not found (cmake --preset release && cmake --build --preset release)" >&2; exit 1; }
[ ! -e "$store" ] || { echo "record_cpu_fix_pairs: $store exists; the runs are numbered from 1 in a new store" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
record() {  # name, then the loop's flags
  local name=$1; shift
  env -u PYTHONPATH "$bin" record --store "$store" --tag "pair_run=$name" --python -- \
    /usr/bin/python3 tests/python/fix_pairs_loop.py --timings "$tmp/$name.json" "$@" 2>"$tmp/$name.log" \
    || { cat "$tmp/$name.log" >&2; exit 1; }
  echo "recorded $name" >&2
}
mlp=(--model mlp --hidden 256 --blocks 6 --steps 40)
record mlp-checkpointed "${mlp[@]}" --checkpoint
record mlp "${mlp[@]}"
record mlp-bf16-autocast "${mlp[@]}" --bf16
record mlp-adam-per-tensor "${mlp[@]}" --optimizer adam
record mlp-adam-foreach "${mlp[@]}" --optimizer adam-foreach
conv=(--model conv --batch 16 --steps 30)
record cnn "${conv[@]}"
record cnn-channels-last "${conv[@]}" --channels-last
# Rollback-journal mode: reading the committed file writes nothing beside it.
/usr/bin/python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute("PRAGMA journal_mode=DELETE"); c.execute("VACUUM"); c.close()' "$store"
