#!/usr/bin/env bash
# The aarch64 wheel's CLI under qemu-user: `diagnose --json` of every bundled
# trace, metric log and memory snapshot equals the x86_64 reference's, byte for
# byte. The binary runs against Debian 11's arm64 glibc 2.31 (the one it is
# linked against, build/deps/aarch64/glibc-2.31), nothing else of arm64.
#   aarch64_qemu_test.sh WHEEL REFERENCE
set -euo pipefail
wheel=$(realpath "$1") reference=$(realpath "$2")
root=$(cd "$(dirname "$0")/../.." && pwd)
qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)
[ -n "$qemu" ] || { echo "aarch64_qemu_test: needs qemu-user-static (apt-get install qemu-user-static)" >&2; exit 2; }
glibc=$root/build/deps/aarch64/glibc-2.31
[ -d "$glibc" ] || { echo "aarch64_qemu_test: no $glibc (scripts/portable_deps.sh aarch64)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -m zipfile -e "$wheel" "$tmp/wheel"
cli=$tmp/wheel/gputriage/_bin/gputriage
chmod +x "$cli"
file -b "$cli" | grep -q "ARM aarch64" || { echo "FAIL: $cli is not an aarch64 binary: $(file -b "$cli")"; exit 1; }
"$qemu" -L "$glibc" "$cli" --version
mapfile -t inputs < <(cd "$root/tests/data" && find traces metrics memory -type f ! -name '*.md' ! -name '*.tsv' | sort)
differ=0 judged=0
cd "$root/tests/data"
for f in "${inputs[@]}"; do
  rc_x=0 rc_a=0
  "$reference" diagnose "$f" --json --color never >"$tmp/x86_64.json" 2>/dev/null || rc_x=$?
  "$qemu" -L "$glibc" "$cli" diagnose "$f" --json --color never >"$tmp/aarch64.json" 2>/dev/null || rc_a=$?
  if [ "$rc_x" != "$rc_a" ] || ! cmp -s "$tmp/x86_64.json" "$tmp/aarch64.json"; then
    echo "FAIL: $f: aarch64 (exit $rc_a) differs from x86_64 (exit $rc_x)"
    diff <(tr ',' '\n' <"$tmp/x86_64.json") <(tr ',' '\n' <"$tmp/aarch64.json") | head -6 || true
    differ=$((differ + 1))
  fi
  [ "$rc_a" = 0 ] && judged=$((judged + 1))
done
[ "$differ" -eq 0 ] || exit 1
echo "ok: aarch64 under $(basename "$qemu"): diagnose --json of all ${#inputs[@]} inputs equals x86_64's ($judged read, exit 0)"
