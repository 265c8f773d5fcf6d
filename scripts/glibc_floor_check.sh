#!/usr/bin/env bash
# Fails when a linked product refers to a glibc symbol version newer than the
# floor the wheel promises (2.28: manylinux_2_28), naming each. Run after every
# portable link (cmake/dependencies.cmake); auditwheel checks the wheel again.
#   glibc_floor_check.sh FILE [FLOOR_MINOR]
set -euo pipefail
file=$1 floor=${2:-28}
# objdump -T lines end "(GLIBC_2.29) log" for a versioned undefined reference
# ("GLIBC_2.29 log" where the version is the default one).
newer=$(objdump -T "$file" | awk -v floor="$floor" '
  { for (i = 1; i < NF; i++) {
      version = $i; gsub(/[()]/, "", version)
      if (version ~ /^GLIBC_2\.[0-9]+/) {
        split(version, v, "."); if (v[2] + 0 > floor) print version " " $NF
      }
    } }' | sort -u)
if [ -n "$newer" ]; then
  echo "glibc_floor_check: $file refers to glibc symbols newer than 2.$floor (define them, or pin their older versions, in src/portable/glibc_compat.cc):" >&2
  echo "$newer" >&2
  exit 1
fi
