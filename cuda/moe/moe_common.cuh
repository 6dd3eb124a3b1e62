#pragma once
// Device helpers shared by the MoE kernels: expert placement (the closed form
// of fabric::moe::Placement) and byte copies that use 16-byte accesses when
// both sides allow.

#include <cstdint>

namespace fabric::kernels::moe {

__device__ __forceinline__ std::uint32_t first_expert(std::uint32_t rank, std::uint32_t experts,
                                                      std::uint32_t world) {
  return static_cast<std::uint32_t>(static_cast<std::uint64_t>(rank) * experts / world);
}

// The largest r with first_expert(r) <= e: r < (e + 1) * N / E.
__device__ __forceinline__ std::uint32_t expert_owner(std::uint32_t e, std::uint32_t experts,
                                                      std::uint32_t world) {
  const auto r = static_cast<std::uint32_t>(
      ((static_cast<std::uint64_t>(e) + 1) * world - 1) / experts);
  return r < world ? r : world - 1;
}

// The block's threads copy `bytes` from src to dst.
__device__ __forceinline__ void block_copy(std::byte* dst, const std::byte* src,
                                           std::uint64_t bytes) {
  const bool wide = ((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src) |
                      bytes) & 15u) == 0;
  if (wide) {
    auto* d = reinterpret_cast<uint4*>(dst);
    const auto* s = reinterpret_cast<const uint4*>(src);
    for (std::uint64_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) d[i] = s[i];
  } else {
    for (std::uint64_t i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
  }
}

}  // namespace fabric::kernels::moe
