#!/usr/bin/env bash
# The ctests that run inside the CPU-only vLLM venv (kv.vllm_connector, weights.vllm_live,
# moe.model_ep, moe.vllm_prepare_finalize): builds (or reuses) the venv, which also holds PyPI's
# torch, transformers and Ray, then runs the given test script in it against this build's
# fabric_lib. Skips (exit 77) only when the venv cannot be
# built, saying why; a failing test fails.
#   run.sh <build>/python <source dir> <test script> [args...]
set -uo pipefail
build_python="$1"
source_dir="$2"
script="$3"
shift 3
log="$(mktemp)"
if ! venv="$("$source_dir/scripts/vllm-venv.sh" 2>"$log" | tail -n 1)" || [[ ! -x "$venv/bin/python" ]]; then
  echo "SKIP: the vLLM venv could not be built (scripts/vllm-venv.sh):"
  tail -n 20 "$log"
  rm -f "$log"
  exit 77
fi
rm -f "$log"
export PYTHONPATH="$build_python" PYTHONDONTWRITEBYTECODE=1 FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo
exec "$venv/bin/python" "$script" "$@"
