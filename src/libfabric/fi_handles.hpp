#pragma once
// Move-only owners for libfabric handles: fi_close() / fi_freeinfo() on destruction.

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <memory>
#include <utility>

#include "common/log.hpp"

namespace fabric::ofi {

template <typename T>
class Fid {
 public:
  Fid() = default;
  explicit Fid(T* handle) : handle_(handle) {}
  Fid(Fid&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Fid& operator=(Fid&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  Fid(const Fid&) = delete;
  Fid& operator=(const Fid&) = delete;
  ~Fid() { reset(); }

  void reset() {
    if (handle_ != nullptr) {
      if (int rc = fi_close(&handle_->fid); rc != 0) {
        log::warn("fi_close failed: {}", fi_strerror(-rc));
      }
      handle_ = nullptr;
    }
  }
  [[nodiscard]] T* get() const noexcept { return handle_; }
  T* operator->() const noexcept { return handle_; }
  T** out() noexcept {
    reset();
    return &handle_;
  }
  explicit operator bool() const noexcept { return handle_ != nullptr; }

 private:
  T* handle_ = nullptr;
};

struct InfoDeleter {
  void operator()(fi_info* info) const noexcept { fi_freeinfo(info); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

}  // namespace fabric::ofi
