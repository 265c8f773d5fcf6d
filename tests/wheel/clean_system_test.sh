#!/usr/bin/env bash
# The wheel on clean systems: for each suite named (Debian's bullseye: glibc 2.31,
# Python 3.9; bookworm: glibc 2.36, Python 3.11; Ubuntu's focal, 20.04: glibc
# 2.31, Python 3.8, pip 20.0.2, upgraded first as README says), a minimal root file system
# made by debootstrap with nothing in it but python3 and venv (no compiler, no
# -dev package), the wheel installed into a fresh venv there, and run with no
# network inside (a network namespace with only loopback):
#   gputriage --version;
#   diagnose --json of every bundled trace and metric log: the same JSON, byte
#     for byte, as REFERENCE (a source build's binary) gives on this machine;
#   record --python of a marked loop (tests/wheel/marked_loop.py; no PyTorch in
#     these systems) into a store: its steps and its input-bound verdict;
#   serve answering its API with that run; agent serving /metrics from the fake
#     NVML (FAKE_NVML, built for glibc 2.28 like the product); top --once.
#
#   clean_system_test.sh WHEEL REFERENCE FAKE_NVML SUITE...
#   clean_system_test.sh --prepare SUITE...   (only make the root file systems;
#                                              CI does it beside the build)
# Root file systems are kept under build/rootfs/ (made once; remove to renew).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "clean_system_test: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "clean_system_test: needs debootstrap (scripts/bootstrap.sh installs it)" >&2; exit 2; }

# Ubuntu's archive key, for its suites: Debian ships no ubuntu-keyring package,
# so Ubuntu 20.04's own is fetched from its archive and pinned by its SHA-256
# (first read 2026-12-07 from focal's Packages index, which lists the same sum).
ubuntu_keyring_deb=pool/main/u/ubuntu-keyring/ubuntu-keyring_2020.02.11.2_all.deb
ubuntu_keyring_sha256=7564f3f76fbc9f165ecc30e2cf2695d38b284e234bffa0c6441ff37f8a7aebd7
ubuntu_keyring() {  # -> the keyring file's path on stdout
  local dir=$root/build/rootfs/ubuntu-keyring
  if ! [ -f "$dir/usr/share/keyrings/ubuntu-archive-keyring.gpg" ]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    curl -fsS --max-time 120 -o "$dir/keyring.deb" "http://archive.ubuntu.com/ubuntu/$ubuntu_keyring_deb" >&2
    echo "$ubuntu_keyring_sha256  $dir/keyring.deb" | sha256sum -c --quiet - >&2 ||
      { echo "clean_system_test: $ubuntu_keyring_deb is not the pinned file" >&2; exit 1; }
    dpkg-deb -x "$dir/keyring.deb" "$dir"
  fi
  echo "$dir/usr/share/keyrings/ubuntu-archive-keyring.gpg"
}

# The pip that Ubuntu 20.04's users upgrade to first (README: its own pip 20.0.2
# refuses the manylinux_2_28 tag); the last pip for Python 3.8. Kept beside the
# root file systems: the systems have no network inside.
pip_for_old_systems=pip==24.3.1

make_rootfs() {  # SUITE -> path on stdout
  local suite=$1 dir=$root/build/rootfs/$1
  if ! [ -f "$dir/.complete" ]; then
    rm -rf "$dir"
    mkdir -p "$root/build/rootfs"
    local source=(http://deb.debian.org/debian) options=()
    case "$suite" in
      focal) source=(http://archive.ubuntu.com/ubuntu)
             options=(--components=main,universe "--keyring=$(ubuntu_keyring)") ;;
    esac
    echo "clean_system_test: debootstrap $suite (minbase + python3, python3-venv)" >&2
    debootstrap --variant=minbase "${options[@]}" --include=python3,python3-venv "$suite" "$dir" "${source[@]}" \
      >"$root/build/rootfs/$suite.log" 2>&1 || { tail -20 "$root/build/rootfs/$suite.log" >&2; exit 1; }
    rm -rf "$dir/var/cache/apt/archives/"*.deb
    touch "$dir/.complete"
  fi
  echo "$dir"
}

pip_wheel() {  # -> the pinned pip wheel's path on stdout
  local dir=$root/build/rootfs/pip
  if ! ls "$dir"/pip-*.whl >/dev/null 2>&1; then
    mkdir -p "$dir"
    /usr/bin/python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$dir" \
      "$pip_for_old_systems" >&2
  fi
  ls "$dir"/pip-*.whl
}

if [ "${1:-}" = --prepare ]; then
  shift
  pip_wheel >/dev/null
  for suite in "$@"; do make_rootfs "$suite" >/dev/null; done
  exit 0
fi
wheel=$(realpath "$1") reference=$(realpath "$2") fake_nvml=$(realpath "$3")
shift 3

# The inputs: every bundled trace, metric log and memory snapshot.
mapfile -t inputs < <(cd "$root/tests/data" && find traces metrics memory -type f ! -name '*.md' ! -name '*.tsv' | sort)
echo "clean_system_test: ${#inputs[@]} bundled inputs"

# The reference JSON, from the source build on this machine, by the same relative paths.
expected=$(mktemp -d)
cleanup_dirs=("$expected")
suites=("$@")
cleanup() {  # the suites run in subshells: every mount they may have left
  local suite
  for suite in "${suites[@]}"; do
    umount -l "$root/build/rootfs/$suite/dev/shm" 2>/dev/null || true
    umount -l "$root/build/rootfs/$suite/proc" 2>/dev/null || true
  done
  rm -rf "${cleanup_dirs[@]}"
}
trap cleanup EXIT
reference_json() {  # INPUT (relative to tests/data)
  local f=$1 rc=0
  mkdir -p "$expected/$(dirname "$f")"
  (cd "$root/tests/data" && "$reference" diagnose "$f" --json --color never >"$expected/$f.json" 2>/dev/null) || rc=$?
  echo "$rc" >"$expected/$f.rc"
}
export -f reference_json
export expected reference root
printf '%s\0' "${inputs[@]}" | xargs -0 -n 1 -P "$(nproc)" bash -c 'reference_json "$1"' _

run_suite() {  # SUITE
  local suite=$1 rootfs work
  rootfs=$(make_rootfs "$suite")
  # What a clean system must not have: a compiler or any -dev package.
  if [ -e "$rootfs/usr/bin/cc" ] || [ -e "$rootfs/usr/bin/gcc" ] || ls "$rootfs/var/lib/dpkg/info/"*-dev*.list >/dev/null 2>&1; then
    echo "FAIL: $suite's root file system has a compiler or a -dev package" >&2
    return 1
  fi
  work=$rootfs/tmp/gputriage-test
  rm -rf "$work"
  mkdir -p "$work/data" "$work/out"
  cp "$wheel" "$work/"
  cp "$(pip_wheel)" "$work/"
  cp "$fake_nvml" "$work/libnvidia-ml.so.1"
  cp "$root/tests/wheel/marked_loop.py" "$root/tests/wheel/check_marked_loop.py" "$root/tests/wheel/inside_test.sh" \
    "$root/tests/wheel/http_get.py" "$work/"
  printf '%s\n' "${inputs[@]}" >"$work/inputs.txt"
  for f in "${inputs[@]}"; do
    mkdir -p "$work/data/$(dirname "$f")"
    cp "$root/tests/data/$f" "$work/data/$f"
  done
  mount -t proc proc "$rootfs/proc"
  mount -t tmpfs tmpfs "$rootfs/dev/shm"
  echo "== $suite: $(chroot "$rootfs" /bin/sh -c '. /etc/os-release; echo "$PRETTY_NAME"'), $(chroot "$rootfs" ldd --version | head -1), $(chroot "$rootfs" python3 --version)"
  # No network inside: a namespace whose only interface is loopback.
  if ! unshare -n /bin/sh -c "ip link set lo up && chroot '$rootfs' /bin/bash /tmp/gputriage-test/inside_test.sh /tmp/gputriage-test/$(basename "$wheel")"; then
    echo "FAIL: $suite: the checks inside failed" >&2
    return 1
  fi
  umount -l "$rootfs/dev/shm" "$rootfs/proc"
  # The same JSON as the source build, input by input.
  local f differ=0
  for f in "${inputs[@]}"; do
    if ! cmp -s "$expected/$f.rc" "$work/out/$f.rc"; then
      echo "FAIL: $suite: diagnose $f exits $(cat "$work/out/$f.rc"), the source build $(cat "$expected/$f.rc")" >&2
      differ=$((differ + 1))
    elif ! cmp -s "$expected/$f.json" "$work/out/$f.json"; then
      echo "FAIL: $suite: diagnose $f --json differs from the source build's:" >&2
      diff <(tr ',' '\n' <"$expected/$f.json") <(tr ',' '\n' <"$work/out/$f.json") | head -10 >&2 || true
      differ=$((differ + 1))
    fi
  done
  [ "$differ" -eq 0 ] || return 1
  local judged bytes
  judged=$(find "$work/out" -name "*.rc" -exec cat {} + | grep -c "^0$" || true)
  bytes=$(find "$work/out" -name '*.json' -path "$work/out/*/*" -exec cat {} + | wc -c)
  echo "ok: $suite: diagnose --json of all ${#inputs[@]} inputs equals the source build's ($judged read, exit 0;" \
       "$bytes bytes of JSON compared)"
}

# The suites side by side (each its own root, mounts and network namespace), each
# into its own log, printed in the order named.
logs=$(mktemp -d)
cleanup_dirs+=("$logs")
pids=()
for suite in "${suites[@]}"; do
  (run_suite "$suite") >"$logs/$suite.log" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!suites[@]}"; do
  wait "${pids[$i]}" || failed=1
  cat "$logs/${suites[$i]}.log"
done
exit "$failed"
