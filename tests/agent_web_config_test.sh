#!/usr/bin/env bash
# The agent behind a web config (exporter-toolkit's format): TLS with a
# self-signed certificate and bcrypt basic auth.
#  - curl, verifying the certificate against itself: no credentials, a wrong
#    password or an unknown user get 401 (with WWW-Authenticate) on /metrics;
#    /healthz answers probes without credentials (a bare "ok"); the right
#    credentials get the page; the configured header is sent once;
#  - SIGHUP reads the web config again (a new header appears; a broken file
#    leaves the running configuration and the agent up);
#  - a client that trusts another CA fails verification; plain HTTP gets no page;
#  - a real Prometheus scrapes it over https with basic_auth and tls_config
#    (target up, series arrive);
#  - bad web configs stop the agent with the file, line and field;
#  - without --listen the agent binds loopback only.
set -u
bin=$1
fake_nvml=$2
root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/tests
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  [ -f "$tmp/prom/pid" ] && kill "$(cat "$tmp/prom/pid")" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
check() {  # WHAT WANT GOT
  if [ "$2" != "$3" ]; then echo "FAIL: $1: got $3, want $2"; fail=1; else echo "ok: $1 ($3)"; fi
}

# A self-signed certificate for 127.0.0.1 and localhost, and another CA.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=gputriage-agent -keyout "$tmp/agent.key" \
  -out "$tmp/agent.crt" -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" 2>/dev/null ||
  { echo "FAIL: openssl could not make a certificate"; exit 1; }
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=other -keyout "$tmp/other.key" -out "$tmp/other.crt" 2>/dev/null
hash=$(/usr/bin/python3 -W ignore -c 'import crypt; print(crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1024)))')
case $hash in \$2b\$10\$*) ;; *) echo "FAIL: no bcrypt hash from Python's crypt: $hash"; exit 1 ;; esac
cat >"$tmp/web.yml" <<EOT
# relative paths are the config file's
tls_server_config:
  cert_file: agent.crt
  key_file: agent.key
  min_version: TLS12
http_server_config:
  headers:
    X-Content-Type-Options: nosniff
basic_auth_users:
  prometheus: '$hash'
EOT
cat >"$tmp/scenario" <<EOT
device name="NVIDIA H100 80GB HBM3" uuid=GPU-w0 bus=00000000:18:00.0 power_limit_w=700 max_sm_mhz=1980
series gpu_util 70
series power_w 400
EOT
port=$(free_port)
GPUTRIAGE_FAKE_NVML_SCENARIO=$tmp/scenario "$bin" agent --listen "127.0.0.1:$port" --nvml-library "$fake_nvml" \
  --hostname node-tls --interval 0.2 --web-config-file "$tmp/web.yml" 2>"$tmp/agent.err" &
agent_pid=$!
pids+=("$agent_pid")
for _ in $(seq 1 100); do grep -q "serving" "$tmp/agent.err" && break; sleep 0.1; done
grep -q "serving https://127.0.0.1:$port/metrics (basic auth)" "$tmp/agent.err" ||
  { echo "FAIL: the agent did not start with TLS and basic auth"; cat "$tmp/agent.err"; exit 1; }
url=https://127.0.0.1:$port
code() { curl -s -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' --cacert "$tmp/agent.crt" "$@"; }
check "no credentials, /metrics" 401 "$(code "$url/metrics")"
grep -qi '^WWW-Authenticate: Basic' "$tmp/headers" || { echo "FAIL: a 401 without WWW-Authenticate"; fail=1; }
check "no credentials, /healthz (Kubernetes probes carry none)" 200 "$(code "$url/healthz")"
grep -qx 'ok' "$tmp/body" || { echo "FAIL: /healthz without credentials is not a bare ok"; cat "$tmp/body"; fail=1; }
check "wrong password" 401 "$(code -u prometheus:wrong "$url/metrics")"
check "unknown user" 401 "$(code -u nobody:s3cret "$url/metrics")"
check "right credentials" 200 "$(code -u prometheus:s3cret "$url/metrics")"
grep -q '^gputriage_nvml_up{error="",hostname="node-tls"} 1' "$tmp/body" || { echo "FAIL: no page with the right credentials"; fail=1; }
grep -qi '^X-Content-Type-Options: nosniff' "$tmp/headers" || { echo "FAIL: the configured header is missing"; fail=1; }
check "Content-Type lines in one reply" 1 "$(grep -ci '^Content-Type:' "$tmp/headers")"
check "right credentials, /healthz" 200 "$(code -u prometheus:s3cret "$url/healthz")"
# SIGHUP: the web config is read again; a broken one is refused and the old one stays.
cp "$tmp/web.yml" "$tmp/web.yml.orig"
sed -i 's/^    X-Content-Type-Options: nosniff$/&\n    X-Frame-Options: deny/' "$tmp/web.yml"
kill -HUP "$agent_pid"
for _ in $(seq 1 50); do grep -q "read again and in use" "$tmp/agent.err" && break; sleep 0.1; done
code -u prometheus:s3cret "$url/metrics" >/dev/null
grep -qi '^X-Frame-Options: deny' "$tmp/headers" || { echo "FAIL: SIGHUP did not bring the new header"; cat "$tmp/agent.err"; fail=1; }
printf 'basic_auth_users: [broken\n' >"$tmp/web.yml"
kill -HUP "$agent_pid"
for _ in $(seq 1 50); do grep -q "the previous configuration stays" "$tmp/agent.err" && break; sleep 0.1; done
grep -q "the previous configuration stays" "$tmp/agent.err" || { echo "FAIL: a broken config on SIGHUP was not reported"; fail=1; }
check "after a broken reload, right credentials" 200 "$(code -u prometheus:s3cret "$url/metrics")"
check "after a broken reload, no credentials" 401 "$(code "$url/metrics")"
cp "$tmp/web.yml.orig" "$tmp/web.yml"
kill -0 "$agent_pid" 2>/dev/null || { echo "FAIL: SIGHUP ended the agent"; fail=1; }

# Verification: against another CA the handshake fails (curl: 60, certificate problem).
curl -s -o /dev/null --cacert "$tmp/other.crt" -u prometheus:s3cret "$url/metrics"
check "a client trusting another CA (curl exit code)" 60 "$?"
plain=$(curl -s -o /dev/null -w '%{http_code}' -u prometheus:s3cret "http://127.0.0.1:$port/metrics")
[ "$plain" = 200 ] && { echo "FAIL: plain HTTP got the page from a TLS listener"; fail=1; } || echo "ok: plain HTTP gets no page ($plain)"

# A real Prometheus scrapes it over https with basic auth.
if command -v prometheus >/dev/null; then
  mkdir -p "$tmp/prom/data"
  printf 's3cret' >"$tmp/password"
  cat >"$tmp/prom/prometheus.yml" <<EOT
global: {scrape_interval: 1s}
scrape_configs:
  - job_name: gputriage-agent-tls
    scheme: https
    tls_config: {ca_file: $tmp/agent.crt}
    basic_auth: {username: prometheus, password_file: $tmp/password}
    static_configs: [{targets: ["127.0.0.1:$port"]}]
EOT
  pport=$(free_port)
  prometheus --config.file="$tmp/prom/prometheus.yml" --storage.tsdb.path="$tmp/prom/data" \
    --web.listen-address="127.0.0.1:$pport" >"$tmp/prom/log" 2>&1 &
  echo $! >"$tmp/prom/pid"
  up=""
  for _ in $(seq 1 60); do
    up=$(curl -s "http://127.0.0.1:$pport/api/v1/query" --data-urlencode 'query=up * on(instance) group_left count by (instance) (DCGM_FI_DEV_GPU_UTIL)' 2>/dev/null |
         /usr/bin/python3 -c 'import json,sys
try: r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")
except Exception: print("")')
    [ "$up" = 1 ] && break
    sleep 0.5
  done
  check "Prometheus scraping over https with basic auth (up, with series)" 1 "$up"
else
  echo "FAIL: prometheus not installed"; fail=1
fi

# Bad web configs: the agent does not start, and says where.
bad() {  # WANT TEXT
  printf '%s\n' "$2" >"$tmp/bad.yml"
  "$bin" agent --listen 127.0.0.1:0 --nvml-library "$fake_nvml" --web-config-file "$tmp/bad.yml" >"$tmp/out" 2>&1
  local rc=$?
  if [ $rc != 3 ] || ! grep -q -- "$1" "$tmp/out"; then echo "FAIL: bad config exited $rc:"; cat "$tmp/out"; fail=1; else echo "ok: refused: $(cat "$tmp/out")"; fi
}
bad "bad.yml:2: basic_auth_users.prometheus must be a bcrypt hash" $'basic_auth_users:\n  prometheus: s3cret'
bad "bad.yml:1: unknown field tls_config" $'tls_config:\n  cert_file: agent.crt'
bad "key values mismatch" $'tls_server_config:\n  cert_file: agent.crt\n  key_file: other.key'
bad "bad.yml:3: key_file" $'tls_server_config:\n  cert_file: agent.crt\n  key_file: missing.key'
bad "bad.yml:3:1: did not find expected" $'basic_auth_users:\n  a: [1, 2'
# Only exporter-toolkit's response headers, the enumerated ones with their values.
bad "bad.yml:3: header X-Custom cannot be configured" $'http_server_config:\n  headers:\n    X-Custom: 1'
bad "bad.yml:3: header Content-Type cannot be configured" $'http_server_config:\n  headers:\n    Content-Type: text/html'
bad "bad.yml:3: header X-Frame-Options: 'foo' is not one of deny, sameorigin" $'http_server_config:\n  headers:\n    X-Frame-Options: foo'
"$bin" agent --listen 127.0.0.1:0 --nvml-library "$fake_nvml" --web-config-file "$tmp/nothing.yml" >"$tmp/out" 2>&1
check "a missing web config (exit code)" 3 "$?"

# Loopback unless told otherwise: the default --listen.
grep -q '"127.0.0.1:9401"' "$root/src/cli/agent_command.cc" || { echo "FAIL: the default --listen is not loopback"; fail=1; }
"$bin" agent --help | grep -q "default 127.0.0.1:9401" || { echo "FAIL: --help does not say the loopback default"; fail=1; }
[ "$fail" = 0 ] && echo "PASS"
exit "$fail"
