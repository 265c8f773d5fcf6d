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
if [ "$rc" != 0 ]; then
  # CI shows only the end of its output: the failing checks' own lines come last,
  # so that a flaky failure says what failed (CI at 0fb08e2 named only the test).
  echo "== what the failing tests said (their first failure lines; the whole output is above)"
  grep -E '^(FAIL|AssertionError|Traceback|.*: Failure$|.*(Assertion|ERROR: AddressSanitizer|runtime error:))' \
    build/asan-ubsan/ctest.log | head -12 || true
fi
exit "$rc"
