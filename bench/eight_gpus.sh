# Sourced by the benchmarks: write_eight_gpus FILE [LINE...] writes a fake NVML
# scenario (tests/fake_nvml) of 8 H100s with GPM, busy 5 samples of 8, each GPU
# also given the extra scenario LINEs (e.g. "process pid=4242 sm=80").
write_eight_gpus() {
  local file=$1 g line
  shift
  : >"$file"
  for g in 0 1 2 3 4 5 6 7; do
    cat >>"$file" <<EOT
device name="NVIDIA H100 80GB HBM3" uuid=GPU-bench-$g bus=00000000:1$g:00.0 power_limit_w=700 max_sm_mhz=1980 gpm=1
series gpu_util 97 97 97 97 97 0 0 0
series power_w 600 610 620 630 640 150 140 130
series sm_mhz 1980
series sm_active 90 90 90 90 90 2 2 2
series tensor_active 60 60 60 60 60 0 0 0
series dram_active 40
EOT
    for line in "$@"; do echo "$line" >>"$file"; done
  done
}
