// Registering memory with a VerbsDomain: host memory, GPU memory by dma-buf or nvidia-peermem.

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/log.hpp"
#include "verbs/verbs_domain.hpp"
#include "verbs/verbs_error.hpp"
#include "verbs/work_request_ids.hpp"

namespace fabric::verbs {

namespace {
class VerbsMemoryRegion final : public domain::MemoryRegion {
 public:
  VerbsMemoryRegion(MrPtr mr, bool host) : mr_(std::move(mr)), host_(host) {}
  [[nodiscard]] void* local_desc() const noexcept override { return desc_of(mr_->lkey, host_); }
  [[nodiscard]] RemoteKey remote_key() const noexcept override {
    return {reinterpret_cast<std::uint64_t>(mr_->addr), mr_->rkey};
  }

 private:
  MrPtr mr_;
  bool host_;
};

}  // namespace

Result<std::unique_ptr<domain::MemoryRegion>> VerbsDomain::register_memory(
    const domain::MemorySpan& span, Access access) {
  void* ptr = span.ptr;
  const std::size_t length = span.length;
  int flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING;
  if (has_access(access, Access::remote_write)) flags |= IBV_ACCESS_REMOTE_WRITE;
  if (has_access(access, Access::remote_read)) flags |= IBV_ACCESS_REMOTE_READ;
  if (span.dmabuf_fd >= 0) {
    // GPU memory the NIC imports as a dma-buf; iova = the virtual address, so
    // remote addresses work the same as for host memory.
    MrPtr mr(ibv_reg_dmabuf_mr(pd_.get(), span.dmabuf_offset, length,
                               reinterpret_cast<std::uintptr_t>(ptr), span.dmabuf_fd, flags));
    if (mr) {
      log::info("verbs: registered {} bytes of {} memory via dma-buf", length,
                span.device.to_string());
      return std::unique_ptr<domain::MemoryRegion>(
          new VerbsMemoryRegion(std::move(mr), /*host=*/false));
    }
    log::info("verbs: ibv_reg_dmabuf_mr failed ({}); trying nvidia-peermem (ibv_reg_mr)",
              std::strerror(errno));
  }
  // ibv_reg_mr drops RELAXED_ORDERING where the device lacks it (optional
  // flag). For GPU memory it works only with nvidia-peermem loaded.
  MrPtr mr(ibv_reg_mr(pd_.get(), ptr, length, flags));
  if (!mr) {
    return verbs_error(fmt::format("ibv_reg_mr({} bytes of {} memory{})", length,
                                   span.device.to_string(),
                                   span.device.is_host() ? ""
                                                         : "; GPU memory needs dma-buf support "
                                                           "or the nvidia_peermem module"),
                       errno);
  }
  if (!span.device.is_host()) {
    log::info("verbs: registered {} bytes of {} memory via nvidia-peermem", length,
              span.device.to_string());
  }
  return std::unique_ptr<domain::MemoryRegion>(
      new VerbsMemoryRegion(std::move(mr), span.device.is_host()));
}

}  // namespace fabric::verbs
