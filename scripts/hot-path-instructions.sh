#!/bin/sh
# Instructions per request on the submit -> post path, counted by callgrind (deterministic,
# unlike timings on a shared machine). Runs the allocation test binary for one kind at a time
# with window 1 (every request is posted from Worker::start_op, none queues behind another) and
# reports, per request: the caller's submit_* call, the worker's part (start_op: pick-up, peer
# lookup, posting; plus posts deferred to progress_pending), their total, the provider's share
# of it (FiDomain::post_write), the engine's own (total - provider), and the completion side
# (Worker::on_tx_done, which frees or recycles the Op). Warm-up requests count too: every
# figure is divided by the number of submit_* calls.
#   scripts/hot-path-instructions.sh [TEST_BINARY] [REQUESTS] [KEEP_DIR]
# docs/benchmarks.md, "Instructions per request".
set -eu
bin=${1:-build/default/tests/unit/fabric_hot_path_allocation_tests}
requests=${2:-2000}
command -v valgrind >/dev/null || { echo "valgrind is not installed (scripts/install-deps.sh)"; exit 77; }
if [ -n "${3:-}" ]; then
  out=$3
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

# arcs FILE CALLER-REGEX CALLEE-REGEX: "Ir calls" summed over the call arcs into the callee
# (from callers matching CALLER-REGEX; "." for any).
arcs() {
  # In callgrind_annotate's caller tree each function's block lists its callers ("< caller
  # (Nx)", with the inclusive cost of those calls) above the function's own "*" line.
  callgrind_annotate --threshold=100 --inclusive=yes --tree=caller "$1" 2>/dev/null |
    awk -v caller="$2" -v callee="$3" '
      / < / { ir = $1; gsub(",", "", ir); n = $0; sub(/.*\(/, "", n); sub(/x\).*/, "", n)
              gsub(",", "", n); name = $0; sub(/\([0-9,]+x\).*/, "", name)
              if (name ~ caller) { block_ir += ir; block_n += n }; next }
      / \* / { if ($0 ~ callee) { total_ir += block_ir; total_n += block_n }
               block_ir = 0; block_n = 0; next }
      /^ *$/ { block_ir = 0; block_n = 0 }
      END { printf "%.0f %.0f", total_ir, total_n }'
}
ir_of() { echo "$1" | cut -d' ' -f1; }
n_of() { echo "$1" | cut -d' ' -f2; }

printf '%-12s %7s %8s %8s %8s %10s %10s %10s\n' kind calls submit worker total provider engine \
  complete
for spec in "single:SingleWriteAllocates:submit_single_write" \
            "paged(64):PagedWriteAllocates:submit_paged_writes" \
            "scatter(8):ScatterToEightPeersAllocates:submit_scatter"; do
  kind=${spec%%:*}; rest=${spec#*:}; test=${rest%%:*}; fn=${rest#*:}
  f="$out/$kind.out"
  # REUSE=1 with KEEP_DIR re-reads the profiles of an earlier run.
  if [ -z "${REUSE:-}" ] || [ ! -s "$f" ]; then
    FABRIC_HOT_PATH_REQUESTS=$requests FABRIC_HOT_PATH_WINDOW=1 \
      valgrind --tool=callgrind --callgrind-out-file="$f" "$bin" \
      --gtest_filter="*.$test*/shm" >"$out/$kind.log" 2>&1 || true
  fi
  # Each function by its defining file: callgrind lists the inlined header code of a function
  # as separate entries of the same name, which must not be counted twice.
  submit=$(arcs "$f" . "engine_requests.cpp:fabric::TransferEngine::$fn\\(")
  n=$(n_of "$submit")
  start=$(arcs "$f" . "worker_requests.cpp:fabric::engine::Worker::start_op\\(")
  # WRITEs the provider refused for a full queue are posted later from progress_pending.
  later=$(arcs "$f" "Worker::progress_pending\\(" "worker_post.cpp:fabric::engine::Worker::post_some\\(")
  provider=$(arcs "$f" . "fi_domain.cpp:fabric::ofi::FiDomain::post_write\\(")
  complete=$(arcs "$f" . "worker_requests.cpp:fabric::engine::Worker::on_tx_done\\(")
  awk -v k="$kind" -v n="$n" -v s="$(ir_of "$submit")" -v w1="$(ir_of "$start")" \
      -v w2="$(ir_of "$later")" -v p="$(ir_of "$provider")" -v c="$(ir_of "$complete")" 'BEGIN {
    if (n == 0) { printf "%-12s no calls recorded\n", k; exit }
    printf "%-12s %7d %8.0f %8.0f %8.0f %10.0f %10.0f %10.0f\n", k, n, s / n, (w1 + w2) / n,
      (s + w1 + w2) / n, p / n, (s + w1 + w2 - p) / n, c / n }'
done
