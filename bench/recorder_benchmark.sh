#!/usr/bin/env bash
# Benchmark (not a test): CPU the recorder spends per sample per GPU, against the
# fake NVML (8 GPUs, GPM, the utilization buffer and two processes each), with
# the run store on. Baseline in the same run: the same record command with
# sampling impossible (no NVML), so process start, the job's wait loop and the
# report are subtracted. Two measured runs: 100 Hz, for a per-sample cost above
# the noise, and 10 Hz, the goal's rate, whose share of one core includes the
# once-a-second work (the job's process tree from /proc, GPU process listing and
# per-process utilization). Goal: < 0.5 % of one core at 10 Hz x 8 GPUs.
#
#   bash bench/recorder_benchmark.sh [SECONDS]
# The fake library answers instantly; a real driver's NVML calls cost more (ioctls).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
bin=build/release/src/cli/gputriage
fake=build/release/fake_nvml/libnvidia-ml.so.1
[ -x "$bin" ] && [ -f "$fake" ] || { cmake --preset release >/dev/null && cmake --build --preset release --target gputriage fake_nvml; }
out=${BENCH_DIR:-bench/out}
mkdir -p "$out"
scenario=$out/eight_gpus.txt
source bench/eight_gpus.sh
write_eight_gpus "$scenario" "series mem_used_mib 60000" "series pcie_rx_kbs 2000 2000 900000" "series fp32_active 5" \
  "buffer 6" "process pid=4242 sm=80 used_mib=50000" "process pid=4343 sm=5 used_mib=2000"
interval=0.01  # 100 Hz for a measurable total; the share is scaled to 10 Hz below
measure() {  # command... -> "user_s sys_s"
  /usr/bin/time -f "%U %S" -o "$out/time.txt" "$@" >/dev/null 2>&1
  cat "$out/time.txt"
}
rm -f "$out"/bench_store*.db*
read -r base_u base_s < <(measure "$bin" record --no-store --nvml-library /nonexistent --interval "$interval" -- sleep "$seconds")
read -r rec_u rec_s < <(GPUTRIAGE_FAKE_NVML_SCENARIO="$scenario" measure "$bin" record --store "$out/bench_store.db" \
  --nvml-library "$fake" --interval "$interval" -- sleep "$seconds")
# 10 Hz: a short and a 4x longer recording; the difference is the steady cost per
# second of recording (start-up, the sketches' first allocations, the final
# report and the store's end-of-run writes cancel out).
long=$((seconds * 4))
read -r short_u short_s < <(GPUTRIAGE_FAKE_NVML_SCENARIO="$scenario" measure "$bin" record --store "$out/bench_store_short.db" \
  --nvml-library "$fake" --interval 0.1 -- sleep "$seconds")
read -r long_u long_s < <(GPUTRIAGE_FAKE_NVML_SCENARIO="$scenario" measure "$bin" record --store "$out/bench_store_long.db" \
  --nvml-library "$fake" --interval 0.1 -- sleep "$long")
ticks() { python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(distinct t_ns) from samples where power is not null').fetchone()[0])" "$1"; }
python3 - "$base_u" "$base_s" "$rec_u" "$rec_s" "$(ticks "$out/bench_store.db")" "$seconds" \
  "$short_u" "$short_s" "$long_u" "$long_s" "$(ticks "$out/bench_store_short.db")" "$(ticks "$out/bench_store_long.db")" <<'PY'
import sys
a = sys.argv[1:]
base, rec, samples, seconds = float(a[0]) + float(a[1]), float(a[2]) + float(a[3]), int(a[4]), float(a[5])
short, long_ = float(a[6]) + float(a[7]), float(a[8]) + float(a[9])
ticks_short, ticks_long = int(a[10]), int(a[11])
gpus = 8
per = max(rec - base, 0.0) / max(samples * gpus, 1)
print(f"100 Hz for {seconds:g} s: {rec:.3f} s CPU against {base:.3f} s for the same command without NVML;"
      f" {samples} samples x {gpus} GPUs: {per*1e6:.1f} us per sample per GPU (store on)")
print(f"  scaled to 10 Hz x 8 GPUs: {per * 10 * gpus * 100:.3f} % of one core")
rate = (long_ - short) / (3 * seconds)
print(f"10 Hz x 8 GPUs, {seconds:g} s and {4*seconds:g} s recordings: {short:.3f} s and {long_:.3f} s CPU"
      f" ({ticks_short} and {ticks_long} samples); steady cost {rate*1e3:.2f} ms per second ="
      f" {rate*100:.3f} % of one core (goal < 0.5 %), with process attribution once a second;"
      f" fixed start/end cost {max(short - rate*seconds, 0)*1e3:.0f} ms")
PY
