#!/usr/bin/env bash
# A throwaway Prometheus (Debian's) for the agent's tests.
#   prometheus_server.sh start DIR RULES TARGET...   starts one scraping each
#        TARGET (HOST:PORT) every second, with RULES loaded ("" for none), on a free
#        127.0.0.1 port; prints its URL
#   prometheus_server.sh stop DIR
set -euo pipefail
action=$1
dir=$2
case $action in
start)
  rules=$3
  shift 3
  mkdir -p "$dir/data"
  targets=$(printf '"%s",' "$@")
  rule_list=""
  [ -n "$rules" ] && rule_list="\"$rules\""
  cat >"$dir/prometheus.yml" <<EOT
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [$rule_list]
scrape_configs:
  - job_name: gputriage-agent
    static_configs:
      - targets: [${targets%,}]
EOT
  port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
    --web.listen-address="127.0.0.1:$port" >"$dir/prometheus.log" 2>&1 &
  echo $! >"$dir/pid"
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/-/ready" >/dev/null && { echo "http://127.0.0.1:$port"; exit 0; }
    sleep 0.2
  done
  echo "prometheus_server.sh: Prometheus did not become ready" >&2
  tail -20 "$dir/prometheus.log" >&2
  exit 1
  ;;
stop)
  [ -f "$dir/pid" ] && kill "$(cat "$dir/pid")" 2>/dev/null || true
  ;;
*)
  echo "usage: prometheus_server.sh start DIR RULES TARGET... | stop DIR" >&2
  exit 2
  ;;
esac
