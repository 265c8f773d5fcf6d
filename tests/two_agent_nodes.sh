# Sourced by the tests that put agents behind a Prometheus: two nodes on the
# fake NVML, each an agent sampling every 0.1 s, judging a 5 s window every
# 0.5 s, at $2/GPU-hour:
#   node-a  GPU 0: a stop-and-go job (95 % for 2 ticks of 6: 31.7 %); GPU 1 idle
#   node-b  GPU 0: a healthy bf16 job (99 %, SM 92 %, tensor 62 %)
# start_two_agent_nodes BIN FAKE_NVML DIR JOB_PID: starts them; appends their
# pids to `pids` and their HOST:PORT to `agent_targets`.
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start_two_agent_nodes() {
  local bin=$1 fake_nvml=$2 dir=$3 job=$4 node port
  cat >"$dir/node-a" <<EOT
device name="NVIDIA H100 80GB HBM3" uuid=GPU-a0 bus=00000000:18:00.0 power_limit_w=700 max_sm_mhz=1980
series gpu_util 95 95 0 0 0 0
series power_w 500 500 120 120 120 120
series sm_mhz 1980
process pid=$job sm=40 used_mib=39000
device name="NVIDIA H100 80GB HBM3" uuid=GPU-a1 bus=00000000:19:00.0 power_limit_w=700 max_sm_mhz=1980
series gpu_util 0
series power_w 70
EOT
  cat >"$dir/node-b" <<EOT
device name="NVIDIA H100 80GB HBM3" uuid=GPU-b0 bus=00000000:18:00.0 power_limit_w=700 max_sm_mhz=1980 gpm=1
series gpu_util 99
series power_w 650
series sm_mhz 1980
series sm_active 92
series tensor_active 62
process pid=$job sm=95 used_mib=69000
EOT
  agent_targets=()
  for node in node-a node-b; do
    port=$(free_port)
    GPUTRIAGE_FAKE_NVML_SCENARIO=$dir/$node "$bin" agent --listen "127.0.0.1:$port" --nvml-library "$fake_nvml" \
      --hostname "$node" --interval 0.1 --window 5 --judge-every 0.5 --price-per-gpu-hour 2 2>"$dir/$node.err" &
    pids+=($!)
    agent_targets+=("127.0.0.1:$port")
  done
}
