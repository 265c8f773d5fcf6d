#!/usr/bin/env bash
# Builds the product's wheel for one architecture from this checkout:
#   dist/gputriage-<version>-cp38-abi3-manylinux_2_28_<arch>.whl
# holding the `gputriage` CLI and the Python package, for any Linux with glibc
# 2.28 or newer and every CPython from 3.8. x86_64 is the release build
# (cmake --preset release: static dependencies, linked against glibc 2.31 and held to 2.28);
# aarch64 is cross-compiled (--preset wheel-aarch64). Then `auditwheel show`
# must find a manylinux policy no newer than 2_28 and no library from outside
# but the ones the policy allows. docs/packaging.md explains the choices.
#
#   bash scripts/build_wheel.sh [x86_64|aarch64]     (default: this machine's)
# Uses what scripts/bootstrap.sh installs (it runs it, unless
# GPUTRIAGE_NO_BOOTSTRAP=1: the image's build stage installs the build packages
# itself), and Debian's packages only. GPUTRIAGE_COMMIT names the commit where
# the tree is not a git checkout.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
arch=${1:-$(uname -m)}
t0=$SECONDS
case "$arch" in
  x86_64) preset=release strip=strip ;;
  aarch64) preset=wheel-aarch64 strip=aarch64-linux-gnu-strip ;;
  *) echo "build_wheel: unknown architecture '$arch' (x86_64 or aarch64)" >&2; exit 2 ;;
esac
[ "$(uname -m)" = x86_64 ] || { echo "build_wheel: builds on x86_64 Debian 12 (aarch64 is cross-compiled)" >&2; exit 2; }

[ "${GPUTRIAGE_NO_BOOTSTRAP:-0}" = 1 ] || bash scripts/bootstrap.sh >/dev/null
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
if [ "$arch" = aarch64 ] && ! command -v aarch64-linux-gnu-g++ >/dev/null; then
  echo "build_wheel: installing Debian's aarch64 cross compiler"
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends g++-aarch64-linux-gnu >/dev/null
fi
# The manylinux checker (a build tool, pinned; never part of the product).
tools=$root/build/wheel-tools
if ! [ -x "$tools/bin/auditwheel" ] || ! cmp -s scripts/requirements-build.txt "$tools/.requirements"; then
  rm -rf "$tools"
  /usr/bin/python3 -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check --no-deps -r scripts/requirements-build.txt
  cp scripts/requirements-build.txt "$tools/.requirements"
fi

bash scripts/portable_deps.sh "$arch"
echo "== build ($preset)"
cmake --preset "$preset" ${GPUTRIAGE_COMMIT:+-DGPUTRIAGE_COMMIT="$GPUTRIAGE_COMMIT"} >/dev/null
cmake --build --preset "$preset" -j "$(nproc)" --target gputriage gputriage_markers_python
build=$root/build/$preset
ext=$(find "$build/python" -name '_markers.abi3.so' | head -1)
[ -n "$ext" ] || { echo "build_wheel: no _markers.abi3.so under $build/python" >&2; exit 1; }

# Stripped copies go into the wheel: the build tree keeps its symbols.
stage=$root/build/wheel-stage-$arch
rm -rf "$stage"
mkdir -p "$stage"
"$strip" -o "$stage/gputriage" "$build/src/cli/gputriage"
"$strip" --strip-unneeded -o "$stage/_markers.abi3.so" "$ext"
mkdir -p dist
rm -f dist/gputriage-*-manylinux_*_"$arch".whl
wheel=$(/usr/bin/python3 scripts/pack_wheel.py --arch "$arch" --cli "$stage/gputriage" --extension "$stage/_markers.abi3.so" --out dist)

echo "== auditwheel show $(basename "$wheel")"
"$tools/bin/auditwheel" show "$wheel" | tee "$stage/auditwheel.txt"
# The policy: no newer than manylinux_2_28, and nothing outside the policy's own list.
policy=$(grep -oE 'manylinux_2_[0-9]+_'"$arch" "$stage/auditwheel.txt" | head -1)
[ -n "$policy" ] || { echo "build_wheel: auditwheel names no manylinux policy" >&2; exit 1; }
minor=$(echo "$policy" | sed -E 's/manylinux_2_([0-9]+)_.*/\1/')
[ "$minor" -le 28 ] || { echo "build_wheel: $policy is newer than manylinux_2_28" >&2; exit 1; }
if grep -q "following external shared libraries are required" "$stage/auditwheel.txt"; then
  echo "build_wheel: the wheel needs libraries from outside it" >&2
  exit 1
fi
size=$(stat -c %s "$wheel")
echo "build_wheel: $wheel ($((size / 1024 / 1024)) MiB, $size bytes; $((SECONDS - t0)) s)"
