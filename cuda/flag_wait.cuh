#pragma once
// Device-side wait on a flag the host sets through a GDRCopy mapping (or any
// host write into device memory). Bounded: a host that never writes must not
// hang the GPU forever.

#include <cstdint>

namespace fabric::kernels {

// True once *flag >= target (">=" because counters may overshoot), false
// after max_spins polls. Volatile loads bypass L1, which does not see writes
// arriving over PCIe; __nanosleep keeps the spinning warp from hogging its SM.
__device__ __forceinline__ bool wait_flag_at_least(const std::uint64_t* flag, std::uint64_t target,
                                                   std::uint64_t max_spins) {
  const auto* f = reinterpret_cast<const volatile unsigned long long*>(flag);
  for (std::uint64_t i = 0; i < max_spins; ++i) {
    if (*f >= target) {
      __threadfence();  // order the flag before the data it guards
      return true;
    }
    __nanosleep(128);
  }
  return *f >= target;
}

}  // namespace fabric::kernels
