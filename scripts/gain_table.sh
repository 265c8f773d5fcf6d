#!/usr/bin/env bash
# Prints predicted against realized for every before/after pair in
# tests/data/gain_pairs.tsv: the gain the "before" run's finding promises (point and
# range) and the mean step time the "after" run measured. The pairs are split as the
# corpus is (tests/corpus/run_corpus.py): "first sight" when the before run is a
# corpus case with a first-sight record (its verdict and gain recorded at the commit
# that added it, which changed no rule), "calibration" otherwise (every pair added
# with or before the gain constants it checks). A pair whose verdict is "none" checks a silence: no finding
# promised its fix a gain, and "off" is how much faster (-) or slower (+) it ran.
# Usage: scripts/gain_table.sh [path/to/gputriage]   (default: the release build)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/release/src/cli/gputriage}
[ -x "$bin" ] || { echo "gain_table: $bin not found (cmake --preset release && cmake --build --preset release)" >&2; exit 1; }
printf '%-40s %-11s %-18s %10s %22s %10s %8s %s\n' pair half verdict point_ms range_ms realized off in_range
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A file under tests/data, or store:PATH#RUN (a run in a committed store, read from a copy).
diagnose() {
  case "$1" in
    store:*)
      local spec=${1#store:}
      cp "tests/data/${spec%%#*}" "$tmp/store.db"
      "$bin" diagnose "${spec##*#}" --store "$tmp/store.db" --json
      rm -f "$tmp"/store.db*;;
    *) local files=(); IFS=, read -ra parts <<< "$1"
       for p in "${parts[@]}"; do files+=("tests/data/$p"); done
       "$bin" diagnose "${files[@]}" --json;;
  esac
}
grep -v '^#' tests/data/gain_pairs.tsv | while IFS=$'\t' read -r name before after verdict fix; do
  [ -n "$name" ] || continue
  b=$(diagnose "$before")
  a=$(diagnose "$after")
  /usr/bin/python3 - "$name" "$verdict" "$b" "$a" "$before" <<'PY'
import hashlib, json, sys
name, verdict, before, after = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
g = next((f["expected_gain"] for f in before["findings"] if f["verdict"] == verdict), None)
def mean_step(report):
    steps = [r["avg_step_ms"] for r in report["recordings"] if r.get("avg_step_ms")]
    if not steps:
        steps = [r["step_markers"]["step_ms_mean"] for r in report["recordings"] if r.get("step_markers")]
    return sum(steps) / len(steps)
real = mean_step(after)
import tomllib
with open("tests/corpus/cases.toml", "rb") as f:
    cases = tomllib.load(f)["case"]
with open("tests/corpus/first_sight.jsonl") as f:
    recorded = {json.loads(line)["id"] for line in f if line.strip()}
before_files = {"tests/data/" + p for p in sys.argv[5].split(",")}
half = "calibration"
for c in cases:
    if c["id"] in recorded and before_files & set(c.get("files", [])):
        half = "first sight"
if verdict == "none":  # no finding promised the fix a gain: it must not have paid (5 %, compare's noise floor)
    was = mean_step(before)
    promised = [f["verdict"] for f in before["findings"] if f.get("expected_gain")]
    held = not promised and real >= 0.95 * was
    print(f"{name:40s} {half:11s} {'(none)':18s} {'-':>10s} {'no gain promised':>22s} {real:10.1f} {100.0 * (real - was) / was:+7.1f}% {'yes' if held else 'NO'}")
elif g is None:
    print(f"{name:40s} {half:11s} {verdict:18s} {'(no finding)':>10s}")
else:
    lo, hi = g["range"]
    off = 100.0 * (g["expected"] - real) / real
    print(f"{name:40s} {half:11s} {verdict:18s} {g['expected']:10.1f} {lo:10.1f} - {hi:9.1f} {real:10.1f} {off:+7.1f}% {'yes' if lo <= real <= hi else 'NO'}")
PY
done
