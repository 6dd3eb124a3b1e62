#pragma once
// Host-side launchers of the MoE kernels (dispatch send/receive, combine
// send/receive). Plain C++ types only, so host code calls them without CUDA
// headers. Each returns a cudaError_t value (0 = success) and only enqueues
// work on `stream`: no allocation, no synchronisation, no host round trip, so
// every launch can be captured in a CUDA graph. The arena pointers are device
// views of the (mapped, pinned) host arenas of include/fabric/moe/layout.hpp.
//
// The send halves never copy to node peers before the host was signalled:
// between the two stage launches and after combine_gather the caller enqueues
// a watcher store (launch_watcher_bump, cuda/watcher_kernels.hpp) that the
// proxy waits for, and only then any direct copy.

#include <cstddef>
#include <cstdint>

namespace fabric::kernels::moe {

// The shapes every kernel needs, from MoeConfig and the rank's ArenaLayout.
struct Shape {
  std::uint32_t world_size = 0;
  std::uint32_t num_experts = 0;
  std::uint32_t top_k = 0;
  std::uint32_t hidden = 0;
  std::uint32_t token_bytes = 0;    // hidden * dispatch element bytes
  std::uint32_t num_scales = 0;
  std::uint32_t combine_input_bf16 = 1;   // else f32
  std::uint32_t combine_output_bf16 = 0;  // else f32
  std::uint64_t slot_bytes = 0;
  std::uint64_t row_bytes = 0;
  std::uint64_t list_capacity = 0;
  std::uint64_t header_bytes = 0;
  std::uint64_t send_offset = 0;    // of the send region in the arena
};

// Scratch the count kernel fills (device memory, sizes in elements).
struct Routes {
  std::uint32_t* count = nullptr;        // [world_size] tokens per destination
  std::uint32_t* first = nullptr;        // [world_size] first slot of each destination
  std::uint64_t* header = nullptr;       // [world_size] arena offset of each RouteHeader
  std::uint32_t* rows_from = nullptr;    // [world_size] combine rows each rank sends back
  std::uint64_t* rows_base = nullptr;    // [world_size]
  std::uint32_t* slot_token = nullptr;   // [source_tokens * min(top_k, world_size)]
  std::int32_t* combine_row = nullptr;   // [group_tokens * top_k]
};

// Dispatch send, step 1 ("count"): one block plans the routes of tokens
// [chunk_begin, chunk_end) of the dp group's `group_tokens` exactly as
// fabric::moe::plan_routes does, and writes the route lists and headers into
// the send region of `arena` (byte-identical to the host plan).
int launch_dispatch_count(const Shape& shape, const std::int32_t* topk_idx,
                          std::uint32_t group_tokens, std::uint32_t chunk_begin,
                          std::uint32_t chunk_end, std::uint32_t epoch, std::byte* arena,
                          const Routes& routes, void* stream);

// Dispatch send, step 2 ("stage"): copies token payloads and scales into
// their send slots; only slots j in [j_begin, j_end) of each destination (the
// private ones first, then the rest).
int launch_dispatch_stage(const Shape& shape, const std::byte* x, const float* scales,
                          std::byte* arena, const Routes& routes, std::uint32_t total_slots,
                          std::uint32_t j_begin, std::uint32_t j_end, void* stream);

// Dispatch receive ("reorder"): output row r takes the token at slot_address[row_slot[r]]
// (device addresses in this rank's or node peers' arenas); padding rows
// (row_slot == 0xffffffff) are zeroed.
int launch_dispatch_reorder(const Shape& shape, const std::uint32_t* row_slot, std::uint32_t rows,
                            const std::uint64_t* slot_address, std::byte* recv_x,
                            float* recv_scales, void* stream);

// Combine send ("gather"): exchange row i of `arena` takes expert_out[gather_row[i]].
int launch_combine_gather(const Shape& shape, const std::byte* expert_out,
                          const std::uint32_t* gather_row, std::uint32_t rows,
                          std::uint64_t exchange_offset, std::byte* arena, void* stream);

// Combine receive ("weighted sum"): out[t] = sum over k in order of
// weights[t][k] * row(combine_row[t][k]), in FP32 with separate roundings
// (no FMA contraction), so it equals the host device bit for bit.
int launch_combine_reduce(const Shape& shape, const std::byte* arena,
                          std::uint64_t combine_offset, const std::int32_t* combine_row,
                          const float* weights, std::uint32_t tokens, std::byte* out,
                          void* stream);

// Pins and maps host memory (the arena) for kernels; returns its device view.
int host_register(void* ptr, std::size_t bytes, void** device_ptr);
int host_unregister(void* ptr);

// Small runtime helpers for the GPU check (tests/moe/gpu_check.cpp).
int device_count(int* count);
int stream_create(void** stream);
int stream_destroy(void* stream);
int stream_synchronize(void* stream);
int device_malloc(void** ptr, std::size_t bytes);
int device_free(void* ptr);
int copy_async(void* dst, const void* src, std::size_t bytes, void* stream);  // any direction
int event_create(void** event);
int event_destroy(void* event);
int event_record(void* event, void* stream);
int event_elapsed_ms(void* start, void* end, float* ms);
// Graph capture of everything enqueued on `stream` between the two calls;
// the second instantiates the graph, launches it once and waits for it.
int capture_begin(void* stream);
int capture_end_and_replay(void* stream);
const char* error_text(int error);

}  // namespace fabric::kernels::moe
