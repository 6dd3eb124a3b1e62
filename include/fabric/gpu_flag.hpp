#pragma once
// A 64-bit word in GPU memory that the host sets through a GDRCopy mapping,
// for kernels that wait on transfer progress without a host round trip
// (cuda/flag_wait.cuh polls such a word). TransferEngine::expect_imm_count
// with a GpuFlag stores a value into it when the expected count is reached.

#include <cstdint>
#include <memory>

#include "fabric/device.hpp"
#include "fabric/status.hpp"

namespace fabric {

class GpuFlag {
 public:
  // Maps the 8-byte-aligned word at `device_word` (device memory of `device`,
  // e.g. from cudaMalloc) with GDRCopy. Errc::unsupported without a CUDA
  // driver, GPU, libgdrapi or the gdrdrv module; Errc::invalid_argument for a
  // misaligned or host pointer.
  static Result<std::shared_ptr<GpuFlag>> map(void* device_word, Device device);
  ~GpuFlag();
  GpuFlag(const GpuFlag&) = delete;
  GpuFlag& operator=(const GpuFlag&) = delete;

  // One 8-byte store over PCIe, then a store fence: a kernel polling the word
  // sees the whole value. Thread-safe.
  Status store(std::uint64_t value);
  [[nodiscard]] void* device_word() const noexcept;
  [[nodiscard]] Device device() const noexcept;

  struct Impl;

 private:
  explicit GpuFlag(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fabric
