#!/usr/bin/env bash
# Builds the fuzz targets of the "fuzz" preset (clang, libFuzzer, ASan + UBSan; the same build
# holds the sanitized C++ tests that scripts/ci-sanitizers.sh runs)
# and runs each for FUZZ_SECONDS (default 20) from its checked-in seed corpus,
# JOBS (default: the CPU count) at a time.
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

if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  targets=()
  for dir in tests/fuzz/corpus/*/; do targets+=("$(basename "$dir")"); done
fi

cmake --preset fuzz >/dev/null
# Only the fuzz targets and what they link, not the tests the preset would also build.
cmake --build --preset fuzz -j "$JOBS" --target "${targets[@]/#/fuzz_}"

fuzz_one() {  # target -> its exit status; output in its log
  local t=$1 work="$BUILD/corpus-work/$1" artifacts="$BUILD/artifacts/$1"
  mkdir -p "$work" "$artifacts"
  # -timeout: one input taking this long is a hang worth a report.
  # -rss_limit_mb: a decoder must not balloon on a 4 KiB input.
  "$BUILD/tests/fuzz/fuzz_$t" -max_total_time="$FUZZ_SECONDS" -max_len=4096 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$work" "tests/fuzz/corpus/$t" >"$BUILD/logs/$t.log" 2>&1
}

mkdir -p "$BUILD/logs"
for t in "${targets[@]}"; do
  [[ -x $BUILD/tests/fuzz/fuzz_$t ]] || { echo "no fuzz target $t" >&2; exit 2; }
done
# One target per CPU at a time: each libFuzzer process is single-threaded.
declare -A rc
for ((i = 0; i < ${#targets[@]}; i += JOBS)); do
  pids=()
  for t in "${targets[@]:i:JOBS}"; do
    fuzz_one "$t" &
    pids+=("$!:$t")
  done
  for p in "${pids[@]}"; do
    status=0
    wait "${p%%:*}" || status=$?
    rc[${p#*:}]=$status
  done
done

failed=()
printf '%-18s %12s %8s %s\n' target executions seconds result
for t in "${targets[@]}"; do
  log="$BUILD/logs/$t.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [[ ${rc[$t]} -eq 0 ]]; then
    result=ok
  else
    result="FAILED (exit ${rc[$t]}; see $log)"
    failed+=("$t")
    tail -n 40 "$log" >&2
  fi
  printf '%-18s %12s %8s %s\n' "$t" "${execs:-?}" "$FUZZ_SECONDS" "$result"
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz targets failed: ${failed[*]}" >&2
  exit 1
fi
