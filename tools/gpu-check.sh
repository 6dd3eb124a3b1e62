#!/usr/bin/env bash
# The prepared GPU check: on a machine with an NVIDIA GPU (e.g. a lent H200)
# it builds the CUDA kernels and GPU tests for sm_90, runs them, runs the
# watcher latency benchmark (host and device-mapped memory), and prints a
# short table last. Bounded: every step has a timeout; the whole run is meant
# to finish in under 8 minutes. Results land in ${OUT:-build/gpu-check}.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-build/gpu-check}"
mkdir -p "$out"
log="$out/gpu-check.log"
: >"$log"
step() { echo "== $*" | tee -a "$log"; }
declare -A result

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$log"
nproc | tee -a "$log"

# With .gpu-bundle (tools/gpu-bundle.sh, carried by the device tool) nothing
# is installed or built here: the binaries run under the bundled loader and
# libraries, and find the GPU driver in this machine's usual places.
if [[ -d .gpu-bundle ]]; then
  result[deps]="ok (bundle)"
  result[build]="ok (prebuilt sm_90 bundle)"
  libpath=".gpu-bundle/lib:${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:/usr/lib64"
  cat >"$out/run" <<RUN
#!/usr/bin/env bash
bin=\$1; shift
exec .gpu-bundle/lib/ld-linux-x86-64.so.2 --library-path "$libpath" ".gpu-bundle/bin/\$bin" "\$@"
RUN
else
  step "dependencies"
  # The lent machine may be offline: install only what is missing, and go on
  # with what is there when apt cannot reach a mirror (the build step tells).
  if pkg-config --exists libfabric hwloc libibverbs fmt spdlog 2>/dev/null && command -v cmake ninja >/dev/null; then
    result[deps]="ok (present)"
  else
    timeout 300 scripts/install-deps.sh >>"$log" 2>&1 && result[deps]=ok || result[deps]="FAILED (offline? use tools/gpu-bundle.sh)"
  fi

  step "configure + build (CUDA sm_90)"
  if timeout 300 cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
       -DFABRIC_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >>"$log" 2>&1 &&
     timeout 420 cmake --build build/gpu -j "$(nproc)" \
       --target fabric_watcher_tests watcher_latency fabric_unit_tests moe_gpu_check >>"$log" 2>&1; then
    result[build]=ok
  else
    result[build]=FAILED
  fi
  cat >"$out/run" <<'RUN'
#!/usr/bin/env bash
bin=$1; shift
case "$bin" in
  fabric_unit_tests) exec build/gpu/tests/unit/fabric_unit_tests "$@" ;;
  moe_gpu_check) exec build/gpu/tests/moe/moe_gpu_check "$@" ;;
  *) exec "build/gpu/tests/watcher/$bin" "$@" ;;
esac
RUN
fi
chmod +x "$out/run"
run="$out/run"

step "GPU and watcher tests"
if timeout 180 "$run" fabric_watcher_tests \
     --gtest_output="json:$out/watcher-tests.json" >"$out/watcher-tests.txt" 2>&1; then
  result[watcher_tests]=ok
else
  result[watcher_tests]=FAILED
fi
gpu_line=$(grep -E "Gpu(Watcher|Registration|Flag)" "$out/watcher-tests.txt" | grep -E "OK|FAILED|SKIPPED" | tr '\n' ' ')
timeout 120 "$run" fabric_unit_tests --gtest_filter='EngineWatcher*:PostTimings*' \
  >>"$log" 2>&1 && result[engine_watcher]=ok || result[engine_watcher]=FAILED

step "watcher latency"
timeout 120 "$run" watcher_latency --json "$out/watcher-latency.json" \
  >"$out/watcher-latency.txt" 2>&1 && result[latency]=ok || result[latency]=FAILED
timeout 120 "$run" watcher_latency --busy-poll \
  --json "$out/watcher-latency-busy.json" >"$out/watcher-latency-busy.txt" 2>&1 ||
  result[latency]=FAILED

step "MoE kernels against the host reference (2 processes, one GPU)"
timeout 240 "$run" moe_gpu_check 20 >"$out/moe-gpu-check.json" 2>"$out/moe-gpu-check.err" &&
  result[moe_kernels]=ok || result[moe_kernels]=FAILED

echo
echo "== gpu-check summary"
printf '%-16s %s\n' step result
for k in deps build watcher_tests engine_watcher latency moe_kernels; do
  printf '%-16s %s\n' "$k" "${result[$k]:-not run}"
done
echo "GPU tests: ${gpu_line:-none reported}"
echo "-- watcher latency (default poll)"; tail -n 6 "$out/watcher-latency.txt" 2>/dev/null
echo "-- watcher latency (busy poll)"; tail -n 6 "$out/watcher-latency-busy.txt" 2>/dev/null
echo "-- MoE kernels (median us per kernel, per rank)"; cat "$out/moe-gpu-check.json" 2>/dev/null
for k in "${!result[@]}"; do [[ "${result[$k]}" == ok* ]] || exit 1; done
exit 0
