#!/usr/bin/env bash
# CI: the core suite under AddressSanitizer + UBSan, then ThreadSanitizer:
# the unit tests and the conformance suite on shm and tcp (real processes).
# Tools, Python and CUDA are left out of these builds to keep CI inside its
# budget; `make test-asan` / `make test-tsan` run everything.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
filter='*/shm:*/tcp:*/shm_k*:*/tcp_k*:-LargeWrite*'
# A Debug build under a sanitizer moves immediates ~30x slower: the reordering
# test checks 200 000 of them here (the normal build in make test checks 10^6).
export FABRIC_REORDER_IMMS=${FABRIC_REORDER_IMMS:-200000}
for preset in asan tsan; do
  start=$(date +%s)
  cmake --preset "$preset" -DFABRIC_BUILD_TOOLS=OFF -DFABRIC_BUILD_PYTHON=OFF \
    -DFABRIC_ENABLE_CUDA=OFF >/dev/null
  cmake --build --preset "$preset" -j "$jobs" --target fabric_unit_tests fabric_conformance_tests
  "build/$preset/tests/unit/fabric_unit_tests" --gtest_brief=1
  "build/$preset/tests/conformance/fabric_conformance_tests" --gtest_brief=1 \
    --gtest_filter="$filter"
  echo "ci-sanitizers: $preset passed in $(( $(date +%s) - start )) s"
done
