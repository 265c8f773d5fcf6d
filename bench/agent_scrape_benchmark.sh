#!/usr/bin/env bash
# Benchmark (not a test): one agent (release build, 8 fake GPUs with GPM,
# sampling every 0.1 s) under scrapers, on loopback. Phases, in one run:
#   baseline  /healthz (the same server, a trivial handler) at RATE for 10 s
#   warm      /metrics at RATE from CLIENTS keep-alive clients for 10 s
#   load      /metrics at RATE from CLIENTS for SECONDS (goal: 1,000/s from 32 for 60 s)
#   stall     the same for 10 s while 8 more connections ask and never read
#   rest      until TOTAL_SCRAPES (10^5) in all
#   tls+auth  a second agent behind a web config (TLS, bcrypt basic auth) at
#             RATE for 10 s: its latency against the plain agent's warm phase
# (the 10 s phases are SECONDS long when that is shorter: the CI smoke)
# Prints p50/p99 scrape latency of each phase (and /metrics over /healthz),
# the sampling cadence during the load (ticks done / ticks due: 1.00 is
# undisturbed), and RSS after 10^4 scrapes, at the load's end and after 10^5
# (flat: no growth once every server thread has served).
#
#   bash bench/agent_scrape_benchmark.sh [SECONDS] [RATE] [CLIENTS] [TOTAL_SCRAPES]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
rate=${2:-1000}
clients=${3:-32}
total=${4:-100000}   # scrapes in all, for the RSS check
short=$((seconds < 10 ? seconds : 10))  # the baseline, warm and stall phases
bin=build/release/src/cli/gputriage
fake=build/release/fake_nvml/libnvidia-ml.so.1
load=build/release/bench/agent_load
[ -x "$bin" ] && [ -f "$fake" ] && [ -x "$load" ] ||
  { cmake --preset release >/dev/null && cmake --build --preset release --target gputriage fake_nvml agent_load; }
out=$(realpath -m "${BENCH_DIR:-bench/out}")
mkdir -p "$out"
scenario=$out/agent_gpus.txt
source bench/eight_gpus.sh
write_eight_gpus "$scenario" "series mem_used_mib 60000"
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
interval=0.1
GPUTRIAGE_FAKE_NVML_SCENARIO=$scenario "$bin" agent --listen "127.0.0.1:$port" --nvml-library "$fake" \
  --interval "$interval" --judge-every 5 2>"$out/agent.err" &
agent=$!
trap 'kill $agent 2>/dev/null' EXIT
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
sleep 2
counter() { curl -sf "http://127.0.0.1:$port/metrics" | awk -v n="$1" '$1 ~ "^"n"({|$)" {print $NF}'; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$agent/status"; }
page_bytes=$(curl -sf "http://127.0.0.1:$port/metrics" | wc -c)

healthz=$("$load" 127.0.0.1 "$port" /healthz "$rate" "$clients" "$short")
warm=$("$load" 127.0.0.1 "$port" /metrics "$rate" "$clients" "$short")
rss_1e4=$(rss_kib)
ticks0=$(counter gputriage_agent_ticks_total)
t0=$(date +%s.%N)
main=$("$load" 127.0.0.1 "$port" /metrics "$rate" "$clients" "$seconds")
t1=$(date +%s.%N)
ticks1=$(counter gputriage_agent_ticks_total)
rss_load=$(rss_kib)
scrapes_load=$(counter gputriage_agent_scrapes_total)
stall=$("$load" 127.0.0.1 "$port" /metrics "$rate" "$clients" "$short" --stall 8)
scrapes=$(counter gputriage_agent_scrapes_total)
while [ "${scrapes%.*}" -lt "$total" ]; do
  rest_s=$(( (total - ${scrapes%.*}) / ${rate%.*} + 1 ))
  "$load" 127.0.0.1 "$port" /metrics "$rate" "$clients" "$rest_s" >/dev/null
  scrapes=$(counter gputriage_agent_scrapes_total)
done
rss_1e5=$(rss_kib)
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$agent/status")

# The same scrapes over TLS with basic auth (exporter-toolkit web config).
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=bench -keyout "$out/agent.key" -out "$out/agent.crt" \
  -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null
hash=$(/usr/bin/python3 -W ignore -c 'import crypt; print(crypt.crypt("bench", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1024)))')
printf 'tls_server_config:\n  cert_file: agent.crt\n  key_file: agent.key\nbasic_auth_users:\n  bench: %s\n' "'$hash'" >"$out/web.yml"
tls_port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
GPUTRIAGE_FAKE_NVML_SCENARIO=$scenario "$bin" agent --listen "127.0.0.1:$tls_port" --nvml-library "$fake" \
  --interval "$interval" --judge-every 5 --web-config-file "$out/web.yml" 2>"$out/agent-tls.err" &
tls_agent=$!
trap 'kill $agent $tls_agent 2>/dev/null' EXIT
for _ in $(seq 1 100); do grep -q serving "$out/agent-tls.err" && break; sleep 0.1; done
sleep 2
tls=$(AGENT_LOAD_CA=$out/agent.crt AGENT_LOAD_USER=bench AGENT_LOAD_PASSWORD=bench \
      "$load" 127.0.0.1 "$tls_port" /metrics "$rate" "$clients" "$short")
/usr/bin/python3 - "$healthz" "$warm" "$main" "$stall" "$ticks0" "$ticks1" "$t0" "$t1" "$interval" "$rss_1e4" "$rss_1e5" \
  "$hwm" "$scrapes" "$page_bytes" "$clients" "$rss_load" "$scrapes_load" "$tls" "$rate" <<'PY'
import json, sys
a = sys.argv[1:]
healthz, warm, main, stall = (json.loads(x) for x in a[0:4])
ticks0, ticks1, t0, t1, interval = float(a[4]), float(a[5]), float(a[6]), float(a[7]), float(a[8])
rss_1e4, rss_1e5, hwm, scrapes, page, clients = int(a[9]), int(a[10]), int(a[11]), float(a[12]), int(a[13]), int(a[14])
rss_load, scrapes_load = int(a[15]), float(a[16])
tls = json.loads(a[17])
def line(name, r):
    return (f"{name:9s} {r['requests']:>7d} requests in {r['seconds']:.1f} s ({r['rate']:.0f}/s), {r['errors']} errors;"
            f" p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, max {r['max_ms']:.1f} ms")
print(f"agent: 8 GPUs sampled every {interval:g} s; /metrics page {page} bytes; {clients} keep-alive clients")
print(line("/healthz", healthz))
print(line("warm", warm))
print(line("load", main))
print(line("stall x8", stall))
print(line("tls+auth", tls))
print(f"TLS + basic auth over plain (warm phase): p50 {tls['p50_ms'] / warm['p50_ms']:.2f}x, p99 {tls['p99_ms'] / warm['p99_ms']:.2f}x")
print(f"/metrics over /healthz (load phase): p50 {main['p50_ms'] / healthz['p50_ms']:.2f}x, p99 {main['p99_ms'] / healthz['p99_ms']:.2f}x")
due = (t1 - t0) / interval
print(f"sampling cadence during the load: {ticks1 - ticks0:.0f} ticks of {due:.0f} due ({(ticks1 - ticks0) / due:.3f})")
# The server's threads each take their stack and malloc arena as they first
# serve: RSS climbs over the first tens of thousands of scrapes, then stays.
print(f"RSS after about 10^4 scrapes {rss_1e4 / 1024:.1f} MiB, after {scrapes_load:.0f} {rss_load / 1024:.1f} MiB,"
      f" after {scrapes:.0f} {rss_1e5 / 1024:.1f} MiB (flat: {rss_1e5 / rss_load:.3f} from the load's end); peak {hwm / 1024:.1f} MiB")
# A scrape that failed, or a rate far below the one asked for, is a failed run:
# its latencies would describe a server that was not answering.
failed = [f"{name}: {r['errors']} errors" for name, r in
          (("/healthz", healthz), ("warm", warm), ("load", main), ("stall x8", stall), ("tls+auth", tls)) if r["errors"]]
failed += [f"{name}: {r['rate']:.0f}/s of {wanted:.0f}/s asked" for name, r, wanted in
           (("load", main, float(a[18])),) if r["rate"] < 0.8 * wanted]
if failed:
    print("FAIL: " + "; ".join(failed))
    sys.exit(1)
PY
