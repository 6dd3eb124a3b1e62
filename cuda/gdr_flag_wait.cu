// A kernel form of wait_flag_at_least, for tests and for streams that must
// not proceed until the host (e.g. an immediate counter) says so.
#include <cuda_runtime.h>

#include "flag_wait.cuh"
#include "watcher_kernels.hpp"

namespace fabric::kernels {

namespace {
__global__ void flag_wait_kernel(const std::uint64_t* flag, std::uint64_t target,
                                 std::uint64_t max_spins, std::uint32_t* result) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  *result = wait_flag_at_least(flag, target, max_spins) ? 1u : 0u;
}
}  // namespace

int launch_flag_wait(const std::uint64_t* device_flag, std::uint64_t target,
                     std::uint64_t max_spins, std::uint32_t* device_result, void* stream) {
  flag_wait_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(device_flag, target, max_spins,
                                                                    device_result);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace fabric::kernels
