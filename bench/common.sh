# Sourced by the benchmark scripts: the release binary (built when missing) and
# the output directory ($BENCH_DIR, else bench/out). Sets `bin` and `out`.
# GPUTRIAGE_BIN runs another build instead (a before/after comparison).
bin=${GPUTRIAGE_BIN:-build/release/src/cli/gputriage}
[ -x "$bin" ] || [ -n "${GPUTRIAGE_BIN:-}" ] || { cmake --preset release >/dev/null && cmake --build --preset release --target gputriage; }
out=${BENCH_DIR:-bench/out}
mkdir -p "$out"
