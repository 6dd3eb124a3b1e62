#pragma once
// Host-side launchers for the kernels in this folder. Plain C++ types only, so
// host code (and tests) call them without CUDA headers or nvcc. Every
// function returns a cudaError_t value: 0 is success.

#include <cstddef>
#include <cstdint>

namespace fabric::kernels {

// One thread stores first, first+1, ..., first+count-1 into the word, each a
// single volatile 64-bit store followed by __threadfence_system().
int launch_watcher_bump(std::uint64_t* device_word, std::uint64_t first, std::uint64_t count,
                        void* stream);
// Adds `delta` to the word (read, then one store); safe to replay in a graph.
int launch_watcher_add(std::uint64_t* device_word, std::uint64_t delta, void* stream);
// Captures launch_watcher_add(device_word, delta) into a CUDA graph and
// launches the instantiated graph `replays` times, then waits for it.
int run_watcher_add_graph(std::uint64_t* device_word, std::uint64_t delta, int replays);

// One thread spins until *device_flag >= target or max_spins polls ran out;
// writes 1 (reached) or 0 (gave up) to *device_result.
int launch_flag_wait(const std::uint64_t* device_flag, std::uint64_t target,
                     std::uint64_t max_spins, std::uint32_t* device_result, void* stream);

int synchronize(void* stream);
int device_alloc(std::size_t bytes, void** device_ptr);
int device_free(void* device_ptr);
int copy_to_host(void* host, const void* device, std::size_t bytes);
int memset_device(void* device, int value, std::size_t bytes);
const char* error_string(int error);

}  // namespace fabric::kernels
