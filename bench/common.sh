# Sourced by the benchmark scripts: the release binary (built when missing) and
# the output directory ($BENCH_DIR, else bench/out). Sets `bin` and `out`.
# GPUTRIAGE_BIN runs another build instead (a before/after comparison).
bin=${GPUTRIAGE_BIN:-build/release/src/cli/gputriage}
[ -x "$bin" ] || [ -n "${GPUTRIAGE_BIN:-}" ] || { cmake --preset release >/dev/null && cmake --build --preset release --target gputriage; }
out=${BENCH_DIR:-bench/out}
mkdir -p "$out"

# measure LABEL SIZE_GB FILE COMMAND...: runs COMMAND $repeats times (REPEATS,
# default 3) and appends "label size file_bytes wall_s rss_kb" of the median run
# to $results (bench/scale_results.py reads it). Its stdout goes to
# $measure_stdout: /dev/null by default, as decompressors write gigabytes that
# must not be timed as disk writes.
repeats=${REPEATS:-3}
measure() {
  local label=$1 size=$2 file=$3
  shift 3
  local runs=()
  for ((i = 0; i < repeats; i++)); do
    /usr/bin/time -f "%e %M" -o "$out/time.txt" "$@" >"${measure_stdout:-/dev/null}" 2>"$out/stderr.txt" ||
      { echo "FAILED: $label: $*"; cat "$out/stderr.txt"; exit 1; }
    runs+=("$(cat "$out/time.txt")")
  done
  local median
  median=$(printf '%s\n' "${runs[@]}" | sort -n | sed -n "$(((repeats + 1) / 2))p")
  echo -e "$label\t$size\t$(stat -c %s "$file")\t$median" | tr ' ' '\t' >>"$results"
  echo "  $label: ${median% *} s, $(( ${median#* } / 1024 )) MiB"
}
