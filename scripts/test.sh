#!/usr/bin/env bash
# Sets up, builds under AddressSanitizer + UBSan, and runs every test.
# Leaves build/asan-ubsan/ctest.log (the whole ctest output) and
# build/asan-ubsan/test_phases.tsv (seconds per phase) for CI's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
start=$SECONDS
cmake --preset asan-ubsan >/dev/null
cmake --build --preset asan-ubsan -j "$(nproc)"
built=$SECONDS
rc=0
# Twice as many tests as cores: most of the long tests wait (on servers, sleeps,
# child jobs) more than they compute: at one test per core ctest kept the CPUs
# half idle. The timing-sensitive tests run alone (RUN_SERIAL in tests/CMakeLists.txt).
ctest --preset asan-ubsan -j "$(($(nproc) * 2))" 2>&1 | tee build/asan-ubsan/ctest.log || rc=$?
printf 'asan-ubsan build\t%d\nctest (asan-ubsan)\t%d\n' $((built - start)) $((SECONDS - built)) >build/asan-ubsan/test_phases.tsv
exit "$rc"
