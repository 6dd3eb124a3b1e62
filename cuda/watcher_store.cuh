#pragma once
// How a kernel writes a watched word so the host poller sees whole values
// promptly: one aligned 64-bit volatile store (never torn, never kept in a
// register or L1), then a system-scope fence so everything the kernel wrote
// before becomes visible to the host no later than the word.

#include <cstdint>

namespace fabric::kernels {

__device__ __forceinline__ void store_watched_word(std::uint64_t* word, std::uint64_t value) {
  __threadfence_system();  // publish earlier writes before the word
  *reinterpret_cast<volatile unsigned long long*>(word) = value;
  __threadfence_system();  // do not let the word sit in a write buffer
}

}  // namespace fabric::kernels
