#!/usr/bin/env bash
# Two builds' verbs figures side by side in one rxe VM boot: verbs-vm.sh for
# build A, then build B, RUNS times, so both share the (emulated) machine's
# state and each has its own ib_write_bw run right after it. A build is a
# directory holding tools/fabric-bench (a copy of an older binary will do).
#   ../shared/rxe-vm/run --share "$PWD" --timeout 1200 -- \
#     tools/bench/verbs-vm-ab.sh build/before build/default build/bench-ab 2
set -euo pipefail
a=$1 b=$2 out=$3 runs=${4:-2}
here=$(dirname "$0")
for i in $(seq 1 "$runs"); do
  for build in "$a" "$b"; do
    name=$(basename "$build")
    echo "== $name run $i"
    "$here/verbs-vm.sh" "$build" "$out/$name-$i" 2>&1 | grep -A4 '^size'
  done
done
