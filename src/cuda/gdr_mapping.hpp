#pragma once
// RAII owners for GDRCopy: a session (gdr_open/gdr_close) and a pinned,
// CPU-mapped range of device memory (gdr_pin_buffer + gdr_map, undone in
// reverse order).

#include <cstddef>
#include <memory>

#include "cuda/driver_types.hpp"
#include "cuda/gdr.hpp"

namespace fabric::cuda {

class GdrSession {
 public:
  // Errc::unsupported when GDRCopy or its kernel module (gdrdrv) is absent.
  static Result<std::shared_ptr<GdrSession>> open();
  static Result<std::shared_ptr<GdrSession>> open(const GdrLibrary& library);
  ~GdrSession();
  GdrSession(const GdrSession&) = delete;
  GdrSession& operator=(const GdrSession&) = delete;

  [[nodiscard]] gdr_t get() const noexcept { return handle_; }
  [[nodiscard]] const GdrApi& api() const noexcept { return library_->api(); }

 private:
  GdrSession(const GdrLibrary& library, gdr_t handle) noexcept
      : library_(&library), handle_(handle) {}
  const GdrLibrary* library_;
  gdr_t handle_;
};

class GdrMapping {
 public:
  GdrMapping() = default;
  // Pins the GPU pages covering [ptr, ptr+size) of a device allocation and
  // maps them; host() then addresses `ptr` itself.
  static Result<GdrMapping> map(std::shared_ptr<GdrSession> session, CUdeviceptr ptr,
                                std::size_t size);
  ~GdrMapping();
  GdrMapping(GdrMapping&& other) noexcept;
  GdrMapping& operator=(GdrMapping&& other) noexcept;
  GdrMapping(const GdrMapping&) = delete;
  GdrMapping& operator=(const GdrMapping&) = delete;

  // Uncached device memory: write it with copy_to() or aligned stores, and
  // read it rarely (each read crosses PCIe).
  [[nodiscard]] void* host() const noexcept { return host_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  // gdr_copy_to_mapping into [offset, offset+n) of the range.
  Status copy_to(std::size_t offset, const void* src, std::size_t n) const;

 private:
  void reset() noexcept;
  std::shared_ptr<GdrSession> session_;
  gdr_mh_t handle_{0};
  bool pinned_ = false;
  void* mapping_ = nullptr;  // page-aligned start, as gdr_map returned it
  std::size_t mapping_len_ = 0;
  void* host_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace fabric::cuda
