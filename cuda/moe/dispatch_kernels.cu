// Dispatch send (count, stage) and dispatch receive (reorder). The layouts
// are those of include/fabric/moe/layout.hpp and plan.hpp; the count kernel
// reproduces fabric::moe::plan_routes byte for byte.
#include <cuda_runtime.h>

#include "moe_common.cuh"
#include "moe_kernels.hpp"

namespace fabric::kernels::moe {

namespace {

constexpr std::uint32_t kFullMask = 0xffffffffu;
constexpr std::uint32_t kRouteMagic = 0x4d6f4552;
constexpr std::uint16_t kNotHere = 0xffff;

__device__ __forceinline__ bool goes_to(const std::int32_t* topk, std::uint32_t t, const Shape& s,
                                        std::uint32_t d) {
  for (std::uint32_t k = 0; k < s.top_k; ++k) {
    const std::int32_t e = topk[static_cast<std::uint64_t>(t) * s.top_k + k];
    if (e >= 0 && expert_owner(static_cast<std::uint32_t>(e), s.num_experts, s.world_size) == d)
      return true;
  }
  return false;
}

__device__ __forceinline__ std::uint32_t warp_sum(std::uint32_t v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(kFullMask, v, o);
  return v;
}

// One block; each warp owns destinations d = warp, warp + warps, ...
__global__ void dispatch_count_kernel(Shape s, const std::int32_t* topk, std::uint32_t tokens,
                                      std::uint32_t chunk_begin, std::uint32_t chunk_end,
                                      std::uint32_t epoch, std::byte* arena, Routes rt) {
  const std::uint32_t n = s.world_size;
  const std::uint32_t r = s.top_k;
  const std::uint32_t lane = threadIdx.x & 31u;
  const std::uint32_t warp = threadIdx.x >> 5;
  const std::uint32_t warps = blockDim.x >> 5;
  const std::uint32_t pairs = tokens * r;
  const std::uint32_t lower = (1u << lane) - 1u;

  // Pass 1: tokens per destination (once per token), rows per expert rank.
  for (std::uint32_t d = warp; d < n; d += warps) {
    std::uint32_t count = 0, rows = 0;
    for (std::uint32_t t = chunk_begin + lane; t < chunk_end; t += 32) count += goes_to(topk, t, s, d);
    for (std::uint32_t i = lane; i < pairs; i += 32) {
      const std::int32_t e = topk[i];
      rows += e >= 0 && expert_owner(static_cast<std::uint32_t>(e), s.num_experts, n) == d;
    }
    count = warp_sum(count);
    rows = warp_sum(rows);
    if (lane == 0) {
      rt.count[d] = count;
      rt.rows_from[d] = rows;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    std::uint64_t cursor = s.send_offset;
    std::uint32_t first = 0;
    std::uint64_t rows = 0;
    for (std::uint32_t d = 0; d < n; ++d) {
      rt.first[d] = first;
      rt.header[d] = cursor + s.list_capacity;
      rt.rows_base[d] = rows;
      first += rt.count[d];
      rows += rt.rows_from[d];
      cursor += s.list_capacity + s.header_bytes + static_cast<std::uint64_t>(rt.count[d]) * s.slot_bytes;
    }
  }
  for (std::uint32_t i = threadIdx.x; i < pairs; i += blockDim.x) rt.combine_row[i] = -1;
  __syncthreads();

  // Pass 2: slots, lists, combine rows and the header of each destination.
  for (std::uint32_t d = warp; d < n; d += warps) {
    const std::uint32_t count = rt.count[d];
    const std::uint64_t header = rt.header[d];
    auto* list = reinterpret_cast<std::uint16_t*>(arena + header - static_cast<std::uint64_t>(count) * r * 2);
    const std::uint32_t local_first = first_expert(d, s.num_experts, n);
    std::uint32_t j = 0;
    for (std::uint32_t base = chunk_begin; base < chunk_end; base += 32) {
      const std::uint32_t t = base + lane;
      const bool hit = t < chunk_end && goes_to(topk, t, s, d);
      const std::uint32_t mask = __ballot_sync(kFullMask, hit);
      if (hit) {
        const std::uint32_t pos = j + __popc(mask & lower);
        rt.slot_token[rt.first[d] + pos] = t;
        for (std::uint32_t k = 0; k < r; ++k) {
          const std::int32_t e = topk[static_cast<std::uint64_t>(t) * r + k];
          const bool here = e >= 0 && expert_owner(static_cast<std::uint32_t>(e), s.num_experts, n) == d;
          list[static_cast<std::uint64_t>(pos) * r + k] =
              here ? static_cast<std::uint16_t>(static_cast<std::uint32_t>(e) - local_first) : kNotHere;
        }
      }
      j += __popc(mask);
    }
    std::uint32_t row = 0, before = 0, mine = 0;
    for (std::uint32_t base = 0; base < pairs; base += 32) {
      const std::uint32_t i = base + lane;
      const std::int32_t e = i < pairs ? topk[i] : -1;
      const bool hit = e >= 0 && expert_owner(static_cast<std::uint32_t>(e), s.num_experts, n) == d;
      const std::uint32_t mask = __ballot_sync(kFullMask, hit);
      if (hit) rt.combine_row[i] = static_cast<std::int32_t>(rt.rows_base[d] + row + __popc(mask & lower));
      row += __popc(mask);
      const std::uint32_t t = i / r;
      before += __popc(__ballot_sync(kFullMask, hit && t < chunk_begin));
      mine += __popc(__ballot_sync(kFullMask, hit && t >= chunk_begin && t < chunk_end));
    }
    std::byte* h = arena + header;
    if (lane == 0) {
      auto* u32 = reinterpret_cast<std::uint32_t*>(h);
      auto* u64 = reinterpret_cast<std::uint64_t*>(h);
      u32[0] = kRouteMagic;
      u32[1] = epoch;
      u32[2] = count;
      u32[3] = mine;
      u64[2] = rt.rows_base[d] + before;             // combine_offset
      u64[3] = header + s.header_bytes;              // send_offset of the slots
    }
    auto* counts = reinterpret_cast<std::uint32_t*>(h + 32);
    for (std::uint32_t x = lane; x < n; x += 32) counts[x] = rt.count[x];
  }
}

__device__ __forceinline__ std::uint32_t destination_of(const Routes& rt, std::uint32_t n,
                                                        std::uint32_t slot) {
  std::uint32_t lo = 0, hi = n;  // the last d with first[d] <= slot and count[d] > 0
  while (hi - lo > 1) {
    const std::uint32_t mid = (lo + hi) / 2;
    if (rt.first[mid] <= slot) lo = mid; else hi = mid;
  }
  while (rt.count[lo] == 0 || slot >= rt.first[lo] + rt.count[lo]) ++lo;  // skip empty ranks
  return lo;
}

__global__ void dispatch_stage_kernel(Shape s, const std::byte* x, const float* scales,
                                      std::byte* arena, Routes rt, std::uint32_t total_slots,
                                      std::uint32_t j_begin, std::uint32_t j_end) {
  for (std::uint32_t i = blockIdx.x; i < total_slots; i += gridDim.x) {
    const std::uint32_t d = destination_of(rt, s.world_size, i);
    const std::uint32_t j = i - rt.first[d];
    if (j < j_begin || j >= j_end) continue;
    const std::uint32_t t = rt.slot_token[i];
    std::byte* slot = arena + rt.header[d] + s.header_bytes + static_cast<std::uint64_t>(j) * s.slot_bytes;
    block_copy(slot, x + static_cast<std::uint64_t>(t) * s.token_bytes, s.token_bytes);
    auto* out_scales = reinterpret_cast<float*>(slot + s.token_bytes);
    for (std::uint32_t q = threadIdx.x; q < s.num_scales; q += blockDim.x)
      out_scales[q] = scales[static_cast<std::uint64_t>(t) * s.num_scales + q];
  }
}

__global__ void dispatch_reorder_kernel(Shape s, const std::uint32_t* row_slot, std::uint32_t rows,
                                        const std::uint64_t* slot_address, std::byte* recv_x,
                                        float* recv_scales) {
  for (std::uint32_t row = blockIdx.x; row < rows; row += gridDim.x) {
    std::byte* out = recv_x + static_cast<std::uint64_t>(row) * s.token_bytes;
    float* out_scales = recv_scales + static_cast<std::uint64_t>(row) * s.num_scales;
    const std::uint32_t slot = row_slot[row];
    if (slot == 0xffffffffu) {
      for (std::uint32_t i = threadIdx.x; i < s.token_bytes; i += blockDim.x) out[i] = std::byte{0};
      for (std::uint32_t q = threadIdx.x; q < s.num_scales; q += blockDim.x) out_scales[q] = 0.0f;
      continue;
    }
    const auto* in = reinterpret_cast<const std::byte*>(slot_address[slot]);
    block_copy(out, in, s.token_bytes);
    const auto* in_scales = reinterpret_cast<const float*>(in + s.token_bytes);
    for (std::uint32_t q = threadIdx.x; q < s.num_scales; q += blockDim.x) out_scales[q] = in_scales[q];
  }
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

unsigned blocks_for(std::uint32_t items) {
  return items == 0 ? 1u : (items < 1024u ? items : 1024u);
}

}  // namespace

int launch_dispatch_count(const Shape& shape, const std::int32_t* topk_idx,
                          std::uint32_t group_tokens, std::uint32_t chunk_begin,
                          std::uint32_t chunk_end, std::uint32_t epoch, std::byte* arena,
                          const Routes& routes, void* stream) {
  dispatch_count_kernel<<<1, 1024, 0, as_stream(stream)>>>(shape, topk_idx, group_tokens, chunk_begin,
                                                          chunk_end, epoch, arena, routes);
  return static_cast<int>(cudaGetLastError());
}

int launch_dispatch_stage(const Shape& shape, const std::byte* x, const float* scales,
                          std::byte* arena, const Routes& routes, std::uint32_t total_slots,
                          std::uint32_t j_begin, std::uint32_t j_end, void* stream) {
  dispatch_stage_kernel<<<blocks_for(total_slots), 128, 0, as_stream(stream)>>>(
      shape, x, scales, arena, routes, total_slots, j_begin, j_end);
  return static_cast<int>(cudaGetLastError());
}

int launch_dispatch_reorder(const Shape& shape, const std::uint32_t* row_slot, std::uint32_t rows,
                            const std::uint64_t* slot_address, std::byte* recv_x,
                            float* recv_scales, void* stream) {
  dispatch_reorder_kernel<<<blocks_for(rows), 128, 0, as_stream(stream)>>>(
      shape, row_slot, rows, slot_address, recv_x, recv_scales);
  return static_cast<int>(cudaGetLastError());
}

int host_register(void* ptr, std::size_t bytes, void** device_ptr) {
  cudaError_t err = cudaHostRegister(ptr, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (err != cudaSuccess) return static_cast<int>(err);
  return static_cast<int>(cudaHostGetDevicePointer(device_ptr, ptr, 0));
}

int host_unregister(void* ptr) { return static_cast<int>(cudaHostUnregister(ptr)); }

}  // namespace fabric::kernels::moe
