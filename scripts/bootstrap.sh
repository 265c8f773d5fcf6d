#!/usr/bin/env bash
# Installs the Debian packages gputriage builds with. Idempotent: installs only
# what is missing. Run as root (CI) or with sudo available.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  zlib1g-dev libsimdjson-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libbenchmark-dev libsqlite3-dev libcpp-httplib-dev python3 procps time
  # The Python package (python/): pybind11, headers, venv + pip for the offline
  # install test, and PyTorch (CPU) for the training-loop acceptance tests.
  pybind11-dev python3-dev python3-venv python3-pip python3-torch
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all packages present"
  exit 0
fi
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
echo "bootstrap: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
