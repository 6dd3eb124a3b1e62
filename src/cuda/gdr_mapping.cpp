#include "cuda/gdr_mapping.hpp"

#include <fmt/format.h>

#include <utility>

#include "common/log.hpp"

namespace fabric::cuda {

Result<std::shared_ptr<GdrSession>> GdrSession::open() {
  auto lib = gdr_library();
  if (!lib) return lib.status();
  return open(**lib);
}

Result<std::shared_ptr<GdrSession>> GdrSession::open(const GdrLibrary& library) {
  gdr_t handle = library.api().gdr_open();
  if (handle == nullptr) {
    return Status(Errc::unsupported, "gdr_open failed: is the gdrdrv kernel module loaded?");
  }
  return std::shared_ptr<GdrSession>(new GdrSession(library, handle));
}

GdrSession::~GdrSession() {
  if (const int rc = api().gdr_close(handle_); rc != 0) log::warn("gdr_close failed: {}", rc);
}

Result<GdrMapping> GdrMapping::map(std::shared_ptr<GdrSession> session, CUdeviceptr ptr,
                                   std::size_t size) {
  if (!session) return Status(Errc::invalid_argument, "GdrMapping::map without a session");
  if (ptr == 0 || size == 0) return Status(Errc::invalid_argument, "empty GDRCopy range");
  const GdrApi& api = session->api();
  GdrMapping m;
  m.session_ = std::move(session);
  gdr_t g = m.session_->get();

  const CUdeviceptr page_start = ptr & ~static_cast<CUdeviceptr>(kGpuPageSize - 1);
  const std::size_t span = static_cast<std::size_t>(ptr - page_start) + size;
  m.mapping_len_ = (span + kGpuPageSize - 1) & ~(kGpuPageSize - 1);

  if (const int rc = api.gdr_pin_buffer(g, static_cast<unsigned long>(ptr), size, 0, 0,
                                        &m.handle_);
      rc != 0) {
    return Status(Errc::provider, fmt::format("gdr_pin_buffer({:#x}, {}) failed: {}", ptr, size,
                                              rc));
  }
  m.pinned_ = true;
  if (const int rc = api.gdr_map(g, m.handle_, &m.mapping_, m.mapping_len_); rc != 0) {
    m.mapping_ = nullptr;
    return Status(Errc::provider, fmt::format("gdr_map failed: {}", rc));
  }
  GdrInfo info{};
  if (const int rc = api.gdr_get_info(g, m.handle_, &info); rc != 0) {
    return Status(Errc::provider, fmt::format("gdr_get_info failed: {}", rc));
  }
  // The mapping starts at the pinned range's first GPU page (info.va), which
  // may lie below ptr.
  if (info.va > ptr || ptr - info.va + size > m.mapping_len_) {
    return Status(Errc::provider,
                  fmt::format("gdr mapping at {:#x} does not cover {:#x}+{}", info.va, ptr, size));
  }
  m.host_ = static_cast<char*>(m.mapping_) + (ptr - info.va);
  m.size_ = size;
  return m;
}

GdrMapping::~GdrMapping() { reset(); }

GdrMapping::GdrMapping(GdrMapping&& other) noexcept
    : session_(std::move(other.session_)),
      handle_(other.handle_),
      pinned_(std::exchange(other.pinned_, false)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      mapping_len_(std::exchange(other.mapping_len_, 0)),
      host_(std::exchange(other.host_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

GdrMapping& GdrMapping::operator=(GdrMapping&& other) noexcept {
  if (this != &other) {
    reset();
    session_ = std::move(other.session_);
    handle_ = other.handle_;
    pinned_ = std::exchange(other.pinned_, false);
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_len_ = std::exchange(other.mapping_len_, 0);
    host_ = std::exchange(other.host_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Status GdrMapping::copy_to(std::size_t offset, const void* src, std::size_t n) const {
  if (host_ == nullptr) return Status(Errc::invalid_argument, "copy_to on an empty GdrMapping");
  if (offset > size_ || n > size_ - offset) {
    return Status(Errc::out_of_range,
                  fmt::format("copy_to [{}, +{}) outside a {}-byte mapping", offset, n, size_));
  }
  const int rc =
      session_->api().gdr_copy_to_mapping(handle_, static_cast<char*>(host_) + offset, src, n);
  if (rc != 0) return Status(Errc::provider, fmt::format("gdr_copy_to_mapping failed: {}", rc));
  return Status::success();
}

void GdrMapping::reset() noexcept {
  if (session_) {
    const GdrApi& api = session_->api();
    if (mapping_ != nullptr) {
      if (const int rc = api.gdr_unmap(session_->get(), handle_, mapping_, mapping_len_); rc != 0) {
        log::warn("gdr_unmap failed: {}", rc);
      }
    }
    if (pinned_) {
      if (const int rc = api.gdr_unpin_buffer(session_->get(), handle_); rc != 0) {
        log::warn("gdr_unpin_buffer failed: {}", rc);
      }
    }
  }
  session_.reset();
  pinned_ = false;
  mapping_ = nullptr;
  mapping_len_ = 0;
  host_ = nullptr;
  size_ = 0;
}

}  // namespace fabric::cuda
