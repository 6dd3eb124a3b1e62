// Thin wrappers over the CUDA runtime for host code built without CUDA headers.
#include <cuda_runtime.h>

#include "moe_kernels.hpp"

namespace fabric::kernels::moe {

namespace {
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
int code(cudaError_t e) { return static_cast<int>(e); }
}  // namespace

int device_count(int* count) { return code(cudaGetDeviceCount(count)); }
int stream_create(void** stream) {
  cudaStream_t s = nullptr;
  const auto e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  *stream = s;
  return code(e);
}
int stream_destroy(void* stream) { return code(cudaStreamDestroy(as_stream(stream))); }
int stream_synchronize(void* stream) { return code(cudaStreamSynchronize(as_stream(stream))); }
int device_malloc(void** ptr, std::size_t bytes) { return code(cudaMalloc(ptr, bytes)); }
int device_free(void* ptr) { return code(cudaFree(ptr)); }
int copy_async(void* dst, const void* src, std::size_t bytes, void* stream) {
  return code(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream)));
}
int event_create(void** event) {
  cudaEvent_t e = nullptr;
  const auto err = cudaEventCreate(&e);
  *event = e;
  return code(err);
}
int event_destroy(void* event) { return code(cudaEventDestroy(static_cast<cudaEvent_t>(event))); }
int event_record(void* event, void* stream) {
  return code(cudaEventRecord(static_cast<cudaEvent_t>(event), as_stream(stream)));
}
int event_elapsed_ms(void* start, void* end, float* ms) {
  return code(cudaEventElapsedTime(ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
}
int capture_begin(void* stream) {
  return code(cudaStreamBeginCapture(as_stream(stream), cudaStreamCaptureModeThreadLocal));
}
int capture_end_and_replay(void* stream) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = cudaStreamEndCapture(as_stream(stream), &graph);
  if (err == cudaSuccess) err = cudaGraphInstantiate(&exec, graph, 0);
  if (err == cudaSuccess) err = cudaGraphLaunch(exec, as_stream(stream));
  if (err == cudaSuccess) err = cudaStreamSynchronize(as_stream(stream));
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);
  return code(err);
}
const char* error_text(int error) { return cudaGetErrorString(static_cast<cudaError_t>(error)); }

}  // namespace fabric::kernels::moe
