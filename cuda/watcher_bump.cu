// Kernels that write watched words; used by the GPU tests and as the pattern
// for engine kernels that signal the host.
#include <cuda_runtime.h>

#include "watcher_kernels.hpp"
#include "watcher_store.cuh"

namespace fabric::kernels {

namespace {

__global__ void watcher_bump_kernel(std::uint64_t* word, std::uint64_t first, std::uint64_t count) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  for (std::uint64_t i = 0; i < count; ++i) store_watched_word(word, first + i);
}

__global__ void watcher_add_kernel(std::uint64_t* word, std::uint64_t delta) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const auto now = *reinterpret_cast<volatile unsigned long long*>(word);
  store_watched_word(word, now + delta);
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

int launch_watcher_bump(std::uint64_t* device_word, std::uint64_t first, std::uint64_t count,
                        void* stream) {
  watcher_bump_kernel<<<1, 1, 0, as_stream(stream)>>>(device_word, first, count);
  return static_cast<int>(cudaGetLastError());
}

int launch_watcher_add(std::uint64_t* device_word, std::uint64_t delta, void* stream) {
  watcher_add_kernel<<<1, 1, 0, as_stream(stream)>>>(device_word, delta);
  return static_cast<int>(cudaGetLastError());
}

int run_watcher_add_graph(std::uint64_t* device_word, std::uint64_t delta, int replays) {
  // Capture needs a non-default stream.
  cudaStream_t stream = nullptr;
  cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (err != cudaSuccess) return static_cast<int>(err);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (err == cudaSuccess) {
    watcher_add_kernel<<<1, 1, 0, stream>>>(device_word, delta);
    const cudaError_t launch = cudaGetLastError();
    err = cudaStreamEndCapture(stream, &graph);
    if (launch != cudaSuccess) err = launch;
  }
  if (err == cudaSuccess) err = cudaGraphInstantiate(&exec, graph, 0);
  for (int i = 0; err == cudaSuccess && i < replays; ++i) err = cudaGraphLaunch(exec, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  return static_cast<int>(err);
}

int synchronize(void* stream) { return static_cast<int>(cudaStreamSynchronize(as_stream(stream))); }

int device_alloc(std::size_t bytes, void** device_ptr) {
  return static_cast<int>(cudaMalloc(device_ptr, bytes));
}

int device_free(void* device_ptr) { return static_cast<int>(cudaFree(device_ptr)); }

int copy_to_host(void* host, const void* device, std::size_t bytes) {
  return static_cast<int>(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost));
}

int memset_device(void* device, int value, std::size_t bytes) {
  return static_cast<int>(cudaMemset(device, value, bytes));
}

const char* error_string(int error) { return cudaGetErrorString(static_cast<cudaError_t>(error)); }

}  // namespace fabric::kernels
