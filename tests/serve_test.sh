#!/usr/bin/env bash
# `gputriage serve` end to end (ctest serve_browser): a store of three recorded
# runs of one experiment (a marked loop on the fake NVML; the third waits six
# times longer for data, a regression), then the JSON API with curl (filters,
# sorting, errors, the token rules) and the pages in headless Chromium
# (tests/browser/serve_test.cjs): the runs table, a run's report, two runs
# compared, the experiment's trend with the regression marked.
#   serve_test.sh GPUTRIAGE FAKE_NVML MARKER_WRITER ARTIFACTS
set -u
bin=$1
fake_nvml=$2
marker_writer=$3
artifacts=$4
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
rm -rf "$artifacts"
mkdir -p "$artifacts"
fail=0
store=$tmp/runs.db

cat >"$tmp/scenario" <<'EOT'
device name="NVIDIA H100 80GB HBM3" uuid=GPU-serve0 bus=00000000:18:00.0 power_limit_w=700 max_sm_mhz=1980
series gpu_util 95 97 0 96 94 0
series power_w 500 520 100 510 505 100
EOT
record() {  # DATA_MS BATCH: one run of experiment loader-exp
  GPUTRIAGE_FAKE_NVML_SCENARIO=$tmp/scenario "$bin" record --nvml-library "$fake_nvml" --store "$store" --no-mlflow \
    --name loader-exp --tag "batch=$2" --interval 0.05 -- "$marker_writer" 25 normal "$1" 30 >/dev/null 2>"$tmp/record.err" ||
    { echo "FAIL: record: $(cat "$tmp/record.err")"; fail=1; }
}
record 5 64
record 5 64
record 60 128
[ $fail -eq 0 ] || exit 1

serves=0
start_serve() {  # ARGS...: sets url (http or https), serve_pid and serve_err, or fails
  # Each server its own stderr file: an earlier one still running writes to its
  # own, never into the file the next one's address is read from.
  serves=$((serves + 1))
  serve_err=$tmp/serve_$serves.err
  "$bin" serve --store "$store" "$@" 2>"$serve_err" &
  serve_pid=$!
  pids+=($serve_pid)
  url=""
  for _ in $(seq 1 100); do
    url=$(grep -oE 'https?://[^ ]*' "$serve_err" | head -1)
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { echo "FAIL: serve did not start: $(cat "$serve_err")"; exit 1; }
}
start_serve --listen 127.0.0.1:0
base=${url%/}
json() {  # URL PYTHON-EXPRESSION-over-d: prints its value
  curl -s "$1" | $py -c "import json,sys; d=json.load(sys.stdin); print($2)"
}
expect() {  # WHAT ACTUAL EXPECTED
  if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: got '$2', expected '$3'"; fail=1; fi
}
expect "the runs API lists the three runs" "$(json "$base/api/runs" "d['total']")" 3
expect "newest first by default" "$(json "$base/api/runs" "[r['id'] for r in d['runs']]")" "[3, 2, 1]"
expect "sorted by data wait, lowest first" "$(json "$base/api/runs?sort=data_wait_percent&order=asc" "d['runs'][-1]['id']")" 3
expect "a tag filter" "$(json "$base/api/runs?tag=batch%3D128" "[r['id'] for r in d['runs']]")" "[3]"
expect "a tag key filter" "$(json "$base/api/runs?tag=batch" "d['total']")" 3
# Issue 24: a value with '=' in it, unencoded, splits on the first '=' only.
expect "a tag filter with an unencoded '='" "$(json "$base/api/runs?tag=batch=128" "[r['id'] for r in d['runs']]")" "[3]"
expect "a name filter (substring, any case)" "$(json "$base/api/runs?name=LOADER" "d['total']")" 3
expect "a name that matches nothing" "$(json "$base/api/runs?name=other" "d['total']")" 0
# Runs 1 and 2 are the same job recorded one after the other: on a machine busy with
# other work their step times can differ past the noise floor (a timing compared
# without interleaving), so only run 3, the 60 ms loader, is required to regress.
expect "the verdict filter finds the regression" "$(json "$base/api/runs?verdict=regression" "3 in [r['id'] for r in d['runs']] and 1 not in [r['id'] for r in d['runs']]")" "True"
expect "paging" "$(json "$base/api/runs?limit=1&offset=1" "(d['total'], [r['id'] for r in d['runs']])")" "(3, [2])"
expect "a run's report is the diagnose document" "$(json "$base/api/runs/3/report" "d['schema'] + ' ' + ','.join(sorted({f['verdict'] for f in d['findings']}))")" \
  "$("$bin" diagnose 3 --store "$store" --json | $py -c "import json,sys; d=json.load(sys.stdin); print(d['schema'] + ' ' + ','.join(sorted({f['verdict'] for f in d['findings']})))")"
expect "a run's charts" "$(json "$base/api/runs/3/charts" "d['schema'] + ' ' + str(d['recordings'][0]['steps']['count'])")" "gputriage.charts 25"
expect "compare" "$(json "$base/api/compare?a=1&b=3" "d['schema'] + ' ' + str(any(m['worse'] for m in d['metrics']))")" "gputriage.comparison True"
expect "the experiment's trend marks run 3" "$(json "$base/api/experiments/loader-exp" "3 in [r['id'] for r in d['runs'] if r['regression']]")" "True"
code() { curl -s -o "$tmp/body" -w '%{http_code}' "$@"; }
expect "a missing run is 404" "$(code "$base/api/runs/99/report")" 404
grep -q "there is no run 99" "$tmp/body" || { echo "FAIL: the 404 does not say which run: $(cat "$tmp/body")"; fail=1; }
expect "a bad run id is 400" "$(code "$base/api/runs/abc/report")" 400
expect "a bad sort is 400" "$(code "$base/api/runs?sort=nope")" 400
expect "compare without ids is 400" "$(code "$base/api/compare?a=1")" 400
expect "an unknown experiment is 404" "$(code "$base/api/experiments/nope")" 404
expect "an unknown path is 404" "$(code "$base/nope")" 404
expect "a rebinding Host name is refused" "$(code -H 'Host: attacker.example:80' "$base/api/runs")" 403
expect "localhost is a loopback name" "$(code -H 'Host: localhost' "$base/api/runs")" 200
expect "the page shell" "$(code "$base/runs/3")" 200
grep -q "connect-src 'self'" "$tmp/body" || { echo "FAIL: the page's policy does not confine requests to itself"; fail=1; }

# Off loopback: a token is required, at least 16 characters.
"$bin" serve --store "$store" --listen 0.0.0.0:0 2>"$tmp/open.err" &
p=$!
sleep 1
if kill -0 $p 2>/dev/null; then
  kill $p; echo "FAIL: serve listened beyond loopback without a token"; fail=1
else
  wait $p
  rc=$?
  expect "beyond loopback without a token: usage error" "$rc" 2
  grep -q "needs a token" "$tmp/open.err" || { echo "FAIL: $(cat "$tmp/open.err")"; fail=1; }
fi
printf 'short\n' >"$tmp/short"
"$bin" serve --store "$store" --token-file "$tmp/short" 2>"$tmp/short.err"
expect "a short token is refused" "$?" 2
openssl rand -hex 24 >"$tmp/token"
token=$(cat "$tmp/token")
start_serve --listen 0.0.0.0:0 --token-file "$tmp/token"
port=$(echo "$url" | sed -E 's#http://[^:]+:([0-9]+)/.*#\1#')
tbase=http://127.0.0.1:$port
expect "with a token: none is 401" "$(code "$tbase/api/runs")" 401
expect "with a token: a wrong one is 401" "$(code -H "Authorization: Bearer ${token}x" "$tbase/api/runs")" 401
expect "with a token: the bearer header" "$(code -H "Authorization: Bearer $token" "$tbase/api/runs")" 200
expect "with a token: ?token= sets a cookie and redirects" "$(code -c "$tmp/jar" "$tbase/runs/2?token=$token")" 303
expect "with a token: the cookie then serves" "$(code -b "$tmp/jar" "$tbase/api/runs/2/report")" 200
location() { curl -s -o /dev/null -D - "$@" | tr -d '\r' | sed -n 's/^[Ll]ocation: //p'; }
expect "with a token: the redirect never names another site (//host)" \
  "$(location "$tbase//attacker.example/x?token=$token")" "/attacker.example/x"
expect "with a token: a decoded line break cannot add a header" \
  "$(curl -s -o /dev/null -D - "$tbase/a%0d%0aSet-Cookie:%20evil=1?token=$token" | grep -ci '^set-cookie: evil')" 0
expect "with a token: any Host name (the token guards it)" "$(code -H "Host: gpu-box.example" -H "Authorization: Bearer $token" "$tbase/api/runs")" 200

# Issue 24: serve takes the agent's web config: TLS and basic auth (its users
# are enough beyond loopback), and SIGHUP reads it again.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=gputriage-serve -keyout "$tmp/serve.key" \
  -out "$tmp/serve.crt" -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" 2>/dev/null
hash=$($py -W ignore -c 'import crypt; print(crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1024)))')
printf 'tls_server_config:\n  cert_file: serve.crt\n  key_file: serve.key\nbasic_auth_users:\n  team: %s\n' "'$hash'" >"$tmp/web.yml"
start_serve --listen 0.0.0.0:0 --web-config-file "$tmp/web.yml"
tls_url=$url
tls_port=$(echo "$tls_url" | sed -E 's#https://[^:]+:([0-9]+)/.*#\1#')
sbase=https://127.0.0.1:$tls_port
expect "web config: serves https beyond loopback with users and no token" "${tls_url%%://*}" https
expect "web config: no credentials is 401" "$(code --cacert "$tmp/serve.crt" "$sbase/api/runs")" 401
curl -s -o /dev/null -D - --cacert "$tmp/serve.crt" "$sbase/api/runs" | grep -qi '^WWW-Authenticate: Basic' ||
  { echo "FAIL: serve's 401 does not ask for basic auth"; fail=1; }
expect "web config: a wrong password is 401" "$(code --cacert "$tmp/serve.crt" -u team:wrong "$sbase/api/runs")" 401
expect "web config: the right password" "$(code --cacert "$tmp/serve.crt" -u team:s3cret "$sbase/api/runs")" 200
expect "web config: plain HTTP on the TLS port gets no page" "$(code "http://127.0.0.1:$tls_port/api/runs" | grep -c '^200$')" 0
kill -HUP "$serve_pid"
for _ in $(seq 1 50); do grep -q "read again and in use" "$serve_err" && break; sleep 0.1; done
expect "web config: SIGHUP reads it again, serve stays up" "$(code --cacert "$tmp/serve.crt" -u team:s3cret "$sbase/api/runs")" 200

[ $fail -eq 0 ] || exit 1
# A failed check exits 1 and says which. Killed by a signal (the browser or node
# crashing under a loaded machine) is not a check's answer: said, and tried once more.
rc=0
node "$here/browser/serve_test.cjs" "$base" "$artifacts" || rc=$?
if [ "$rc" -ge 128 ]; then
  echo "note: the browser checks were killed by signal $((rc - 128)); trying once more"
  rc=0
  node "$here/browser/serve_test.cjs" "$base" "$artifacts" || rc=$?
fi
[ "$rc" -eq 0 ] || { echo "FAIL: the browser checks exited $rc"; exit 1; }
