#!/usr/bin/env bash
# ctest weights.vllm_live: builds (or reuses) the CPU-only vLLM venv (with Ray, its extras),
# then runs live_test.py in it against this build's fabric_lib. Skips (exit 77) only when the
# venv cannot be built, saying why.
set -uo pipefail
build_python="$1"   # <build>/python, where fabric_lib and its extensions are
source_dir="$2"
log="$(mktemp)"
if ! venv="$("$source_dir/scripts/vllm-venv.sh" 2>"$log" | tail -n 1)" || [[ ! -x "$venv/bin/python" ]]; then
  echo "SKIP: the vLLM venv could not be built (scripts/vllm-venv.sh):"
  tail -n 20 "$log"
  rm -f "$log"
  exit 77
fi
rm -f "$log"
export PYTHONPATH="$build_python"
exec "$venv/bin/python" "$source_dir/tests/weights/vllm/live_test.py"
