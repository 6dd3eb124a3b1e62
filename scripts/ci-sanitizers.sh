#!/usr/bin/env bash
# CI: the unit tests and the conformance suite (with the channel and peer-liveness tests) on shm
# and tcp (real processes) under AddressSanitizer + UBSan, then under ThreadSanitizer.
#
# Both builds are -O2 (RelWithDebInfo): a sanitized Debug build ran these suites 2-3x slower and
# took longer to compile, and CI must stay under 60 minutes on 2 cores. The source has no
# assert() (errors are values), so NDEBUG loses no check.
# - ASan + UBSan: the clang build of preset "fuzz", which scripts/run-fuzzers.sh has configured
#   and whose library it has compiled already; one sanitized library serves both.
# - TSan: preset "tsan" with GCC's runtime. clang's TSan runtime reports the conformance
#   tests' reads of a buffer that a peer *process* wrote through libfabric as races: the
#   happens-before runs through the other process, which no TSan can see.
# Tools, Python and CUDA are left out of these builds; `make test-asan` / `make test-tsan`
# (Debug) run everything.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh fuzz  # clang and its sanitizer runtimes; nothing when present
jobs=${JOBS:-$(nproc)}
# Conformance tests run one per process through ctest, as in make test: a
# provider's process-wide state (shm's above all) must not leak from one test
# into the next, nor into the children forked from the test process.
conformance='/(shm|tcp)(_k[0-9]+)?($| )'
# Immediates the reordering test checks (the normal build in make test checks 10^6): a
# sanitized build moves them several times slower, TSan slower than ASan.
# A FABRIC_REORDER_IMMS set by the caller applies to both.
declare -A reorder_imms=([fuzz]=200000 [tsan]=50000)
declare -A configure_args=([fuzz]="" [tsan]="-DCMAKE_BUILD_TYPE=RelWithDebInfo")
caller_imms=${FABRIC_REORDER_IMMS:-}
for preset in fuzz tsan; do
  export FABRIC_REORDER_IMMS=${caller_imms:-${reorder_imms[$preset]}}
  start=$(date +%s)
  # shellcheck disable=SC2086  # the extra arguments are words
  cmake --preset "$preset" -DFABRIC_BUILD_TOOLS=OFF -DFABRIC_BUILD_PYTHON=OFF \
    -DFABRIC_ENABLE_CUDA=OFF ${configure_args[$preset]} >/dev/null
  cmake --build --preset "$preset" -j "$jobs" --target fabric_unit_tests fabric_conformance_tests \
    fabric_channel_tests
  "build/$preset/tests/unit/fabric_unit_tests" --gtest_brief=1
  ctest --test-dir "build/$preset" -L conformance -R "$conformance" -E LargeWrite -j "$jobs" \
    --output-on-failure
  echo "ci-sanitizers: $preset passed in $(( $(date +%s) - start )) s"
done
