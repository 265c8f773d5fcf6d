#!/usr/bin/env bash
# What the portable build links against, for one architecture, under
# build/deps/<arch>/ (docs/packaging.md says why each piece is there):
#   glibc-2.31/  Debian 11's libc6, libc6-dev and libgcc-s1, unpacked (not installed): the
#                binary and the Python extension link against glibc 2.31's
#                symbol versions, so they run on any Linux with glibc >= 2.31.
#   lib/         static archives built from Debian's own source packages for the
#                three libraries Debian ships only as shared objects: simdjson,
#                fmt and ISA-L, at the versions of the headers we compile with.
#   root/        (aarch64 only) Debian 12's arm64 -dev packages, unpacked: the
#                headers and static archives of every other dependency.
# Only Debian's archive is used (its binary and source packages, through a
# private apt state under build/deps/apt-<arch>: the machine's apt is not touched).
#
#   bash scripts/portable_deps.sh [x86_64|aarch64]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
arch=${1:-$(uname -m)}
case "$arch" in
  x86_64) deb_arch=amd64 triplet=x86_64-linux-gnu ;;
  aarch64) deb_arch=arm64 triplet=aarch64-linux-gnu ;;
  *) echo "portable_deps: unknown architecture '$arch' (x86_64 or aarch64)" >&2; exit 2 ;;
esac
out=$root/build/deps/$arch
stamp=$out/.complete
# The inputs of what is built here: this script (its versions and steps).
want=$(sha256sum "$0" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "portable_deps: $arch present ($out)"
  exit 0
fi
rm -rf "$out"
mkdir -p "$out/lib" "$out/src" "$out/debs"

# ---- a private apt state: Debian 11 and 12, binary and source -------------
# (one per architecture: the lists of that architecture only)
apt_dir=$root/build/deps/apt-$deb_arch
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
cat >"$apt_dir/sources.list" <<EOF
deb [arch=$deb_arch signed-by=$keyring] http://deb.debian.org/debian bullseye main
deb [arch=$deb_arch signed-by=$keyring] http://deb.debian.org/debian bookworm main
deb [arch=$deb_arch signed-by=$keyring] http://deb.debian.org/debian bookworm-updates main
deb [arch=$deb_arch signed-by=$keyring] http://deb.debian.org/debian-security bookworm-security main
deb-src [signed-by=$keyring] http://deb.debian.org/debian bookworm main
EOF
: >"$apt_dir/status"
mkdir -p "$apt_dir/empty"
apt_opts=(-q -o APT::Sandbox::User="$(id -un)" -o Dir::Etc::SourceList="$apt_dir/sources.list"
  -o Dir::Etc::SourceParts="$apt_dir/empty" -o Dir::Etc::Preferences="$apt_dir/empty/none" -o Dir::Etc::PreferencesParts="$apt_dir/empty"
  -o Dir::State::Lists="$apt_dir/lists" -o Dir::State::Status="$apt_dir/status" -o Dir::Cache="$apt_dir/cache"
  -o APT::Architecture="$deb_arch" -o APT::Architectures::="$deb_arch"
  -o Debug::NoLocking=1)
# Lists older than a day are fetched again.
if [ -z "$(find "$apt_dir/lists" -maxdepth 1 -name '*bullseye*Packages*' -mmin -1440 2>/dev/null | head -1)" ]; then
  apt-get "${apt_opts[@]}" update >/dev/null
fi

# The newest version of a package in one suite ("bullseye", "bookworm").
version_in() {  # PACKAGE:ARCH SUITE
  apt-cache "${apt_opts[@]}" madison "$1" | awk -v s="$2" '$0 ~ "debian(-security)?[^ ]* "s"[-/ ]" {print $3; exit}'
}
# Downloads PACKAGE:ARCH at VERSION and unpacks it into DIR.
unpack() {  # PACKAGE:ARCH VERSION DIR
  local into=$out/debs/${1%%:*} file
  mkdir -p "$into"
  (cd "$into" && apt-get "${apt_opts[@]}" download "$1=$2" >/dev/null)
  file=$(find "$into" -name '*.deb' | head -1)
  [ -n "$file" ] || { echo "portable_deps: $1=$2 was not downloaded" >&2; exit 1; }
  dpkg-deb -x "$file" "$3"
}
# Absolute symlinks (lib64/ld-linux…, libm.so.6 …) made relative, so that the
# linker follows them inside the unpacked tree, not into the machine's own /lib.
relative_links() {  # DIR
  local dir=$1 link target
  while IFS= read -r link; do
    target=$(readlink "$link")
    ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$dir$target")" "$link"
  done < <(find "$dir/" -type l -lname '/*')
}

# ---- glibc 2.31 (Debian 11) ------------------------------------------------
glibc=$out/glibc-2.31
mkdir -p "$glibc"
# With Debian 11's libgcc_s (gcc 10) to link against: Debian 12's calls glibc
# 2.35's _dl_find_object. At run time the host's own libgcc_s serves.
for p in libc6 libc6-dev libcrypt1 libgcc-s1; do
  v=$(version_in "$p:$deb_arch" bullseye)
  [ -n "$v" ] || { echo "portable_deps: no $p:$deb_arch in Debian 11" >&2; exit 1; }
  unpack "$p:$deb_arch" "$v" "$glibc"
done
relative_links "$glibc"
# Linker scripts name their libraries by absolute path: inside --sysroot, ld
# looks for them under the sysroot (it must find libc.so.6 2.31, not the machine's).
grep -q "GNU ld script" "$glibc/usr/lib/$triplet/libc.so"

# ---- aarch64: Debian 12's arm64 headers and static archives -----------------
# (glibc's own headers are the cross toolchain's.)
dev_packages=(
  libcrypt-dev zlib1g-dev zlib1g libzstd-dev libsqlite3-dev libyaml-dev
  libssl-dev libncurses-dev libncursesw6 libtinfo6 libpq-dev libsimdjson-dev libfmt-dev libisal-dev libcli11-dev
  nlohmann-json3-dev libgrpc++-dev libgrpc-dev libprotobuf-dev libabsl-dev libre2-dev libc-ares-dev libpython3.11-dev
  libpython3.11-stdlib python3.11-dev
  # The shared objects their CMake and pkg-config files point at (configuration
  # checks that they exist; nothing links them).
  libfmt9 libsimdjson14 libprotobuf32 libsqlite3-0 libssl3 libzstd1 libyaml-0-2 libisal2 libpq5 libgrpc++1.51
  libgrpc29 libabsl20220623 libre2-9 libc-ares2 libpython3.11
)
if [ "$arch" != "$(uname -m)" ]; then
  for p in "${dev_packages[@]}"; do
    name=$p:$deb_arch
    v=$(version_in "$name" bookworm)
    [ -n "$v" ] || { name=$p; v=$(version_in "$p" bookworm); }  # Architecture: all (headers only)
    [ -n "$v" ] || { echo "portable_deps: no $p:$deb_arch in Debian 12" >&2; exit 1; }
    unpack "$name" "$v" "$out/root"
  done
  relative_links "$out/root"
  headers_version() { dpkg-deb -f "$(find "$out/debs/$1" -name '*.deb' | head -1)" Version; }
else
  headers_version() { dpkg-query -W -f='${Version}' "$1"; }
fi

# ---- simdjson, fmt, ISA-L from Debian's source packages ---------------------
# The same versions as the headers the code is compiled against.
source_package() {  # SOURCE VERSION -> unpacked directory on stdout
  (cd "$out/src" && apt-get "${apt_opts[@]}" source --download-only "$1=$2" >/dev/null &&
     dpkg-source -x --no-check "$1_${2#*:}.dsc" "$1" >/dev/null)
  echo "$out/src/$1"
}
if [ "$arch" = "$(uname -m)" ]; then cc=gcc cxx=g++ ar=ar; else cc=$triplet-gcc cxx=$triplet-g++ ar=$triplet-ar; fi
flags=(-O3 -DNDEBUG -fPIC)

dir=$(source_package simdjson "$(headers_version libsimdjson-dev)")
"$cxx" "${flags[@]}" -std=c++17 -I "$dir/singleheader" -c "$dir/singleheader/simdjson.cpp" -o "$out/src/simdjson.o"
"$ar" rcs "$out/lib/libsimdjson.a" "$out/src/simdjson.o"

dir=$(source_package fmtlib "$(headers_version libfmt-dev)")
for f in format os; do "$cxx" "${flags[@]}" -std=c++17 -I "$dir/include" -c "$dir/src/$f.cc" -o "$out/src/fmt_$f.o"; done
"$ar" rcs "$out/lib/libfmt.a" "$out/src/fmt_format.o" "$out/src/fmt_os.o"

dir=$(source_package libisal "$(headers_version libisal-dev)")
# ISA-L's own makefile for a static library (x86_64 needs nasm; aarch64 its own assembly).
isal_arch=$([ "$arch" = aarch64 ] && echo aarch64 || echo x86_64)
isal_make=(host_cpu="$isal_arch" CC="$cc" AR="$ar")
[ "$arch" = aarch64 ] && isal_make+=(arch=aarch64)
# (gcc makes position-independent code by default here, as the PIE binary needs.)
make -C "$dir" -f Makefile.unx -j "$(nproc)" "${isal_make[@]}" lib >"$out/src/isal.log" 2>&1 ||
  { tail -30 "$out/src/isal.log"; exit 1; }
cp "$dir/bin/isa-l.a" "$out/lib/libisal.a"

rm -rf "$out/debs"
echo "$want" >"$stamp"
echo "portable_deps: $arch ready in $out"
