#!/usr/bin/env bash
# Builds the "fuzz" preset (clang, libFuzzer, ASan + UBSan) and runs every
# fuzz target for FUZZ_SECONDS (default 20) from its checked-in seed corpus.
# Exits non-zero if the build fails or any target crashes, leaks, times out or
# runs out of memory; the reproducer is left in build/fuzz/artifacts/<target>/.
#
#   scripts/run-fuzzers.sh                  # all targets, 20 s each
#   FUZZ_SECONDS=300 scripts/run-fuzzers.sh mr_desc_decode
#
# New inputs the fuzzer finds go to build/fuzz/corpus-work/<target>/, never
# into the checked-in tests/fuzz/corpus/ (add a reproducer there by hand).
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-20}
JOBS=${JOBS:-$(nproc)}
BUILD=build/fuzz

scripts/install-deps.sh fuzz
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$JOBS"

if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  targets=()
  for dir in tests/fuzz/corpus/*/; do targets+=("$(basename "$dir")"); done
fi

failed=()
printf '%-18s %12s %8s %s\n' target executions seconds result
for t in "${targets[@]}"; do
  bin="$BUILD/tests/fuzz/fuzz_$t"
  [[ -x $bin ]] || { echo "no fuzz target $t ($bin)" >&2; exit 2; }
  work="$BUILD/corpus-work/$t"
  artifacts="$BUILD/artifacts/$t"
  log="$BUILD/logs/$t.log"
  mkdir -p "$work" "$artifacts" "$(dirname "$log")"
  # -timeout: one input taking this long is a hang worth a report.
  # -rss_limit_mb: a decoder must not balloon on a 4 KiB input.
  rc=0
  "$bin" -max_total_time="$FUZZ_SECONDS" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [[ $rc -eq 0 ]]; then
    result=ok
  else
    result="FAILED (exit $rc; see $log)"
    failed+=("$t")
    tail -n 40 "$log" >&2
  fi
  printf '%-18s %12s %8s %s\n' "$t" "${execs:-?}" "$FUZZ_SECONDS" "$result"
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz targets failed: ${failed[*]}" >&2
  exit 1
fi
