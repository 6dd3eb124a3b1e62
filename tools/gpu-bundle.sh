#!/usr/bin/env bash
# Prepares what tools/gpu-check.sh needs on a lent GPU machine that cannot
# fetch packages: the GPU test binaries built here for sm_90, with every
# shared library they load (glibc and its loader included, so the bundle
# does not depend on that machine's distribution), in .gpu-bundle/
# (git-ignored; the device tool carries it: carry [".gpu-bundle"]).
# The CUDA driver and GDRCopy are not bundled: they come from that machine.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/gpu-bundle
bundle=.gpu-bundle
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFABRIC_ENABLE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DFABRIC_BUILD_PYTHON=OFF >/dev/null
targets=(fabric_watcher_tests watcher_latency fabric_unit_tests moe_gpu_check)
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
binaries=("$build/tests/watcher/fabric_watcher_tests" "$build/tests/watcher/watcher_latency"
          "$build/tests/unit/fabric_unit_tests" "$build/tests/moe/moe_gpu_check")
for bin in "${binaries[@]}"; do
  strip --strip-debug -o "$bundle/bin/$(basename "$bin")" "$bin"
  # Every resolved library except the vDSO and the GPU driver's own.
  ldd "$bin" | awk '/=> \// {print $3} $1 ~ /ld-linux/ {print $1}' | while read -r lib; do
    case "$(basename "$lib")" in libcuda.so*|libnvidia*|libgdrapi*) continue ;; esac
    [[ -e "$bundle/lib/$(basename "$lib")" ]] || cp -L "$lib" "$bundle/lib/"
  done
done
# libfabric loads some providers as plugins at run time.
if [[ -d /usr/lib/x86_64-linux-gnu/libfabric ]]; then
  cp -rL /usr/lib/x86_64-linux-gnu/libfabric "$bundle/lib/libfabric-providers"
fi
du -sh "$bundle"
echo "bundle ready: run tools/gpu-check.sh on the GPU machine with .gpu-bundle carried"
