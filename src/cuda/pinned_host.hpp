#pragma once
// Move-only owner of device-mapped, portable pinned host memory: the host
// reads it as ordinary cached memory, every CUDA context can read and write it
// through its device pointer.

#include <cstddef>
#include <memory>

#include "cuda/primary_context.hpp"

namespace fabric::cuda {

class PinnedHostMemory {
 public:
  PinnedHostMemory() = default;
  // cuMemHostAlloc(DEVICEMAP | PORTABLE) inside device `ordinal`'s primary
  // context, which stays retained until the memory is freed, so the memory
  // never depends on a context the application may destroy. Not
  // WRITECOMBINED: the host reads it, and write-combined reads bypass the cache.
  // Uses the process-wide driver(): Errc::unsupported without CUDA.
  static Result<PinnedHostMemory> allocate(std::size_t bytes, int ordinal = 0);
  static Result<PinnedHostMemory> allocate(const Driver& driver, std::size_t bytes, int ordinal);
  ~PinnedHostMemory();
  PinnedHostMemory(PinnedHostMemory&& other) noexcept;
  PinnedHostMemory& operator=(PinnedHostMemory&& other) noexcept;
  PinnedHostMemory(const PinnedHostMemory&) = delete;
  PinnedHostMemory& operator=(const PinnedHostMemory&) = delete;

  [[nodiscard]] void* host() const noexcept { return host_; }
  [[nodiscard]] CUdeviceptr device() const noexcept { return device_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  void free() noexcept;
  std::shared_ptr<PrimaryContext> ctx_;
  void* host_ = nullptr;
  CUdeviceptr device_ = 0;
  std::size_t size_ = 0;
};

}  // namespace fabric::cuda
