#!/usr/bin/env bash
# Installs the Debian packages gputriage builds with, and the test-only Python
# environment (.venv: the real trackers the tests run beside gputriage, pinned in
# tests/requirements.txt). Idempotent: installs only what is missing. Run as root
# (CI) or with sudo available.
#
#   bash scripts/bootstrap.sh            everything: the build and every test's environment
#   bash scripts/bootstrap.sh --product  the build only (scripts/demo.sh): no test
#                                        environments (.venv, .venv-trainers, and
#                                        .venv-torch2's 4 GB of PyTorch 2.x)
#   bash scripts/bootstrap.sh --packages the Debian and npm packages only: what the
#                                        sanitizer tree builds with (CI starts that
#                                        build while the rest is set up beside it)
set -euo pipefail
mode=all
case "${1:-}" in
  "") ;;
  --product) mode=product ;;
  --packages) mode=packages ;;
  *) echo "usage: bash scripts/bootstrap.sh [--product | --packages]" >&2; exit 2 ;;
esac
packages=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  zlib1g-dev libsimdjson-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  # Compressed traces: gzip through ISA-L, zstd; the igzip and zstd tools are the
  # trace benchmark's baselines.
  libisal-dev isal libzstd-dev zstd
  libgtest-dev libbenchmark-dev libsqlite3-dev python3 procps time curl
  # TensorBoard event files (protobuf messages); PostgreSQL for the team store;
  # Prometheus (server and promtool) for the agent's tests.
  libprotobuf-dev protobuf-compiler libpq-dev postgresql prometheus
  # The Python package (python/): CPython's headers (the limited API), venv +
  # pip for the install tests, and PyTorch (CPU) for the training-loop tests.
  python3-dev python3-venv python3-pip python3-torch
  # The deployment files' check (YAML) and binutils' readelf.
  python3-yaml binutils
  # The agent's web config: libyaml, bcrypt (libxcrypt), TLS (OpenSSL; the
  # openssl tool makes the tests' self-signed certificate).
  libyaml-dev libcrypt-dev libssl-dev openssl
  # The kubelet's pod-resources API (gRPC over its unix socket).
  libgrpc++-dev protobuf-compiler-grpc
  # The HTML report's browser tests drive Debian's Chromium (fonts for its
  # screenshots); `top` draws with ncurses and is tested under tmux. (Node.js
  # and npm, which fetch uPlot at build time, come with the machine; below.)
  chromium fonts-dejavu-core libncurses-dev tmux
  # The portable build (the release tree, the wheel): Debian's source packages
  # of simdjson, fmt and ISA-L unpacked (dpkg-dev) and built (nasm), and the
  # wheel's clean-system test (debootstrap).
  dpkg-dev nasm debootstrap
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all packages present"
else
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  echo "bootstrap: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

root=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v npm >/dev/null 2>&1; then
  # Machines of this kind carry Node.js with npm; elsewhere Debian's packages serve.
  echo "bootstrap: installing nodejs npm"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends nodejs npm
fi

# The release tree's glibc 2.31 and static archives (scripts/portable_deps.sh).
portable_deps() {
  bash "$root/scripts/portable_deps.sh" "$(uname -m)"
}

# Web assets (uPlot, bundled into the binary at build time) and the browser
# tests' driver (playwright-core, which uses Debian's Chromium, never a download),
# at the versions package-lock.json pins.
npm_packages() {
  if [ -f "$root/node_modules/.package-lock.json" ] && cmp -s "$root/package-lock.json" "$root/node_modules/.gputriage-lock"; then
    echo "bootstrap: npm packages present"
    return
  fi
  echo "bootstrap: installing the npm packages (package-lock.json)"
  (cd "$root" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$root/package-lock.json" "$root/node_modules/.gputriage-lock"
}

# Tests and benchmarks only (never the product): an MLflow server, TensorBoard's
# event reader, the wandb SDK, in a virtual environment of Debian's Python.
test_environment() {
  local venv=$root/.venv requirements=$root/tests/requirements.txt
  # HTA for the trace benchmark, without the notebook stack its package names (see the file).
  local nodeps=$root/tests/requirements-nodeps.txt
  local stamp=$venv/.requirements
  if [ -x "$venv/bin/python" ] && cat "$requirements" "$nodeps" | cmp -s - "$stamp"; then
    echo "bootstrap: test environment present"
    return
  fi
  echo "bootstrap: installing the test environment ($requirements, $nodeps)"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$nodeps"
  cat "$requirements" "$nodeps" >"$stamp"
}

# The trainers people use (Hugging Face Trainer with Accelerate), for the
# zero-code trainer tests: a virtual environment that sees Debian's python3-torch
# (--system-site-packages), with every package pinned and installed without its
# requirements: their own ask for a torch newer than Debian's 1.13 and pip would
# fetch a CUDA build of several GB. Lightning is pinned too, though Debian's torch
# 1.13 cannot import it on Python 3.11 (tests/python/test_trainers.py says why).
trainers_environment() {
  local trainers_venv=$root/.venv-trainers trainers=$root/tests/requirements-trainers.txt
  # Debian's torch 1.13 predates Python 3.11: torch's own fix for the one module
  # Lightning needs (pytorch#91795), applied as it loads, in this environment only.
  local backport=$root/tests/python/trainers/torch_py311_backport.py
  local trainers_stamp=$trainers_venv/.requirements site
  if [ -x "$trainers_venv/bin/python" ] && cat "$trainers" "$backport" | cmp -s - "$trainers_stamp"; then
    echo "bootstrap: trainers' test environment present"
    return
  fi
  echo "bootstrap: installing the trainers' test environment ($trainers)"
  rm -rf "$trainers_venv"
  /usr/bin/python3 -m venv --system-site-packages "$trainers_venv"
  "$trainers_venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$trainers"
  site=$("$trainers_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  cp "$backport" "$site/gputriage_torch_py311_backport.py"
  echo "import gputriage_torch_py311_backport" >"$site/gputriage_torch_py311_backport.pth"
  cat "$trainers" "$backport" >"$trainers_stamp"
}

# PyTorch 2.x as users install it from PyPI (tests/requirements-torch2.txt says
# what is in it and why), for the zero-code tests against current PyTorch; about
# 4 GB, mostly the CUDA libraries its CUDA build loads at import.
torch2_environment() {
  local venv=$root/.venv-torch2 requirements=$root/tests/requirements-torch2.txt
  local stamp=$venv/.requirements
  if [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$stamp"; then
    echo "bootstrap: PyTorch 2.x test environment present"
    return
  fi
  echo "bootstrap: installing the PyTorch 2.x test environment ($requirements)"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir --no-deps -r "$requirements"
  "$venv/bin/python" -c 'import torch; assert torch.__version__.startswith("2.")'
  cp "$requirements" "$stamp"
}

# These need the packages above and not each other (downloads, and builds of one
# core each): side by side, each into its own log, printed when it ends, whole
# when it fails. One after another they took about a minute of a fresh machine.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
steps=(portable_deps npm_packages test_environment trainers_environment torch2_environment)
[ "$mode" = product ] && steps=(portable_deps npm_packages)
[ "$mode" = packages ] && steps=(npm_packages)
pids=()
for step in "${steps[@]}"; do
  (set -euo pipefail; "$step") >"$logs/$step.log" 2>&1 &
  pids+=($!)
done
# A step that fails is shown and tried once more, alone: each is idempotent
# (a venv starts afresh) and most of what fails here is a download (a registry's
# reset connection, a mirror's 503) that a second try gets.
failed=()
for i in "${!steps[@]}"; do
  step=${steps[$i]}
  if wait "${pids[$i]}"; then
    grep '^bootstrap\|^portable_deps' "$logs/$step.log" || true
    continue
  fi
  echo "bootstrap: $step failed; its log's end, then a second try:"
  tail -40 "$logs/$step.log"
  if (set -euo pipefail; "$step") >"$logs/$step.retry.log" 2>&1; then
    grep '^bootstrap\|^portable_deps' "$logs/$step.retry.log" || true
  else
    echo "bootstrap: $step failed again:"
    tail -40 "$logs/$step.retry.log"
    failed+=("$step")
  fi
done
[ ${#failed[@]} -eq 0 ] || { echo "bootstrap: failed: ${failed[*]}" >&2; exit 1; }
