#!/usr/bin/env bash
# ctest entry point of the verbs suite: boots one Soft-RoCE (rdma_rxe) VM via
# ../shared/rxe-vm/run and runs every verbs test inside it (in-vm.sh).
# Exit 77 (ctest: skipped) where the VM runner is not available.
set -euo pipefail
build_dir=$(cd "$1" && pwd)
src_dir=$(cd "$2" && pwd)
vm="$src_dir/../shared/rxe-vm/run"
if [[ ! -x "$vm" ]]; then
  echo "SKIP: $vm not found: the verbs suite needs the rxe VM runner beside the checkout"
  exit 77
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: the rxe VM runner needs root"
  exit 77
fi
case "$build_dir" in
  "$src_dir"/*) ;;
  *) echo "the build directory must be inside the source tree (the VM shares only that)"; exit 1 ;;
esac
exec "$vm" --share "$src_dir" --timeout "${RXE_VM_TIMEOUT:-1500}" -- \
  bash "$src_dir/tests/verbs/in-vm.sh" "$build_dir"
