#!/usr/bin/env bash
# Records tests/nsys/cpu_job.py with Nsight Systems and the PyTorch profiler at
# once, into tests/data/traces/nsys/same_run_cpu/ (job.sqlite, job.pt.trace.json):
# the same run seen by both, for the agreement test (tests/nsys_same_run_test.cc).
# Needs no GPU. Run by hand, not in CI (nsys is 600 MB unpacked):
#   - nsys 2022.4.2.1: Debian 12's non-free nsight-systems and nsight-systems-target,
#     downloaded through a private apt state (the machine's apt is not touched)
#     and unpacked under build/deps/nsight-systems, with libssh-4 for its importer;
#   - NVTX from Python: NVIDIA's `nvtx` package 0.2.8 from PyPI, unpacked beside
#     it (0.2.17's ranges are not recorded by nsys 2022.4: only a domain event);
#   - PyTorch: Debian's python3-torch (CPU 1.13) under /usr/bin/python3.
#
#   bash tests/nsys/record_cpu_job.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=${1:-tests/data/traces/nsys/same_run_cpu}
deps=$root/build/deps/nsight-systems
version=2022.4.2.1~11.8.0-5~deb12u1
mkdir -p "$deps" "$out"

if [ ! -x "$deps/root/usr/lib/nsight-systems/bin/nsys" ]; then
  apt_dir=$deps/apt
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/empty"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main non-free" \
    >"$apt_dir/sources.list"
  : >"$apt_dir/status"
  apt_opts=(-q -o APT::Sandbox::User="$(id -un)" -o Dir::Etc::SourceList="$apt_dir/sources.list"
    -o Dir::Etc::SourceParts="$apt_dir/empty" -o Dir::Etc::Preferences="$apt_dir/empty/none"
    -o Dir::Etc::PreferencesParts="$apt_dir/empty" -o Dir::State::Lists="$apt_dir/lists"
    -o Dir::State::Status="$apt_dir/status" -o Dir::Cache="$apt_dir/cache")
  apt-get "${apt_opts[@]}" update >/dev/null
  (cd "$deps" && apt-get "${apt_opts[@]}" download "nsight-systems=$version" "nsight-systems-target=$version" libssh-4 >/dev/null)
  rm -rf "$deps/root"
  for deb in "$deps"/*.deb; do dpkg -x "$deb" "$deps/root"; done
fi
nsys=$deps/root/usr/lib/nsight-systems/bin/nsys
importer=$deps/root/usr/lib/nsight-systems/host-linux-x64/QdstrmImporter

if [ ! -d "$deps/nvtx-0.2.8" ]; then
  /usr/bin/python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux2014_x86_64 -d "$deps/wheels" "nvtx==0.2.8"
  mkdir -p "$deps/nvtx-0.2.8"
  (cd "$deps/nvtx-0.2.8" && /usr/bin/python3 -m zipfile -e "$deps"/wheels/nvtx-0.2.8-*.whl .)
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$nsys" --version
# NVTX and OS runtime calls; no CPU sampling or context switches (they need
# perf_event access a container may not give).
PYTHONPATH=$deps/nvtx-0.2.8 "$nsys" profile --trace=nvtx,osrt --sample=none --cpuctxsw=none \
  --output "$work/job" --force-overwrite true /usr/bin/python3 tests/nsys/cpu_job.py "$work/job.pt.trace.json"
# This nsys finds its importer only where Debian installs it: the stream is imported here.
quietly() { "$@" >"$work/progress.txt" 2>&1 || { tail -5 "$work/progress.txt"; exit 1; }; }
[ -f "$work/job.nsys-rep" ] || quietly "$importer" -i "$work/job.qdstrm"
quietly "$nsys" export --type sqlite --output "$work/job.sqlite" "$work/job.nsys-rep"
cp "$work/job.sqlite" "$work/job.pt.trace.json" "$out/"
ls -l "$out"
