// Combine send (gather expert rows into the exchange region in the order the
// combine WRITEs need) and combine receive (the weighted sum, FP32, k in order).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "moe_common.cuh"
#include "moe_kernels.hpp"

namespace fabric::kernels::moe {

namespace {

__global__ void combine_gather_kernel(Shape s, const std::byte* expert_out,
                                      const std::uint32_t* gather_row, std::uint32_t rows,
                                      std::uint64_t exchange_offset, std::byte* arena) {
  const std::uint64_t bytes = static_cast<std::uint64_t>(s.hidden) * (s.combine_input_bf16 ? 2 : 4);
  for (std::uint32_t i = blockIdx.x; i < rows; i += gridDim.x)
    block_copy(arena + exchange_offset + static_cast<std::uint64_t>(i) * s.row_bytes,
               expert_out + static_cast<std::uint64_t>(gather_row[i]) * bytes, bytes);
}

__global__ void combine_reduce_kernel(Shape s, const std::byte* arena, std::uint64_t combine_offset,
                                      const std::int32_t* combine_row, const float* weights,
                                      std::uint32_t tokens, std::byte* out) {
  for (std::uint32_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    for (std::uint32_t h = threadIdx.x; h < s.hidden; h += blockDim.x) {
      float acc = 0.0f;
      for (std::uint32_t k = 0; k < s.top_k; ++k) {
        const std::int32_t row = combine_row[static_cast<std::uint64_t>(t) * s.top_k + k];
        if (row < 0) continue;
        const float w = weights[static_cast<std::uint64_t>(t) * s.top_k + k];
        const std::byte* in = arena + combine_offset + static_cast<std::uint64_t>(row) * s.row_bytes;
        const float v = s.combine_input_bf16
                            ? __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(in)[h])
                            : reinterpret_cast<const float*>(in)[h];
        acc = __fadd_rn(acc, __fmul_rn(w, v));  // never fused: the host rounds twice too
      }
      const std::uint64_t at = static_cast<std::uint64_t>(t) * s.hidden + h;
      if (s.combine_output_bf16)
        reinterpret_cast<__nv_bfloat16*>(out)[at] = __float2bfloat16_rn(acc);
      else
        reinterpret_cast<float*>(out)[at] = acc;
    }
  }
}

unsigned blocks_for(std::uint32_t items) {
  return items == 0 ? 1u : (items < 1024u ? items : 1024u);
}

}  // namespace

int launch_combine_gather(const Shape& shape, const std::byte* expert_out,
                          const std::uint32_t* gather_row, std::uint32_t rows,
                          std::uint64_t exchange_offset, std::byte* arena, void* stream) {
  combine_gather_kernel<<<blocks_for(rows), 128, 0, static_cast<cudaStream_t>(stream)>>>(
      shape, expert_out, gather_row, rows, exchange_offset, arena);
  return static_cast<int>(cudaGetLastError());
}

int launch_combine_reduce(const Shape& shape, const std::byte* arena,
                          std::uint64_t combine_offset, const std::int32_t* combine_row,
                          const float* weights, std::uint32_t tokens, std::byte* out,
                          void* stream) {
  combine_reduce_kernel<<<blocks_for(tokens), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      shape, arena, combine_offset, combine_row, weights, tokens, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace fabric::kernels::moe
