#!/usr/bin/env bash
# CI: the core suite under AddressSanitizer + UBSan, then ThreadSanitizer:
# the unit tests and the conformance suite on shm and tcp (real processes).
# Tools, Python and CUDA are left out of these builds to keep CI inside its
# budget; `make test-asan` / `make test-tsan` run everything.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
# Conformance tests run one per process through ctest, as in make test: a
# provider's process-wide state (shm's above all) must not leak from one test
# into the next, nor into the children forked from the test process.
conformance='/(shm|tcp)(_k[0-9]+)?($| )'
# A Debug build under a sanitizer moves immediates ~30x slower: the reordering
# test checks 200 000 of them under ASan, 50 000 under TSan, which is slower again
# (200 000 took 87 of its 105 s); the normal build in make test checks 10^6.
# A FABRIC_REORDER_IMMS set by the caller applies to both.
declare -A reorder_imms=([asan]=200000 [tsan]=50000)
caller_imms=${FABRIC_REORDER_IMMS:-}
for preset in asan tsan; do
  export FABRIC_REORDER_IMMS=${caller_imms:-${reorder_imms[$preset]}}
  start=$(date +%s)
  cmake --preset "$preset" -DFABRIC_BUILD_TOOLS=OFF -DFABRIC_BUILD_PYTHON=OFF \
    -DFABRIC_ENABLE_CUDA=OFF >/dev/null
  cmake --build --preset "$preset" -j "$jobs" --target fabric_unit_tests fabric_conformance_tests
  "build/$preset/tests/unit/fabric_unit_tests" --gtest_brief=1
  ctest --test-dir "build/$preset" -L conformance -R "$conformance" -E LargeWrite -j "$jobs" \
    --output-on-failure
  echo "ci-sanitizers: $preset passed in $(( $(date +%s) - start )) s"
done
