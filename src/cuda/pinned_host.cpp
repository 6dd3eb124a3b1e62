#include "cuda/pinned_host.hpp"

#include <utility>

#include "common/log.hpp"

namespace fabric::cuda {

Result<PinnedHostMemory> PinnedHostMemory::allocate(std::size_t bytes, int ordinal) {
  auto d = driver();
  if (!d) return d.status();
  return allocate(**d, bytes, ordinal);
}

Result<PinnedHostMemory> PinnedHostMemory::allocate(const Driver& driver, std::size_t bytes,
                                                    int ordinal) {
  if (bytes == 0) return Status(Errc::invalid_argument, "pinned allocation of 0 bytes");
  auto ctx = PrimaryContext::retain(driver, ordinal);
  if (!ctx) return ctx.status();
  auto scope = ScopedContext::enter(driver, (*ctx)->get());
  if (!scope) return scope.status();

  PinnedHostMemory mem;
  mem.ctx_ = std::move(ctx).value();
  const DriverApi& api = driver.api();
  if (Status s = driver.check(
          api.cuMemHostAlloc(&mem.host_, bytes, kMemHostAllocDeviceMap | kMemHostAllocPortable),
          "cuMemHostAlloc");
      !s.ok()) {
    mem.host_ = nullptr;
    return s;
  }
  mem.size_ = bytes;
  if (Status s = driver.check(api.cuMemHostGetDevicePointer(&mem.device_, mem.host_, 0),
                              "cuMemHostGetDevicePointer");
      !s.ok()) {
    return s;  // mem's destructor frees the allocation
  }
  return mem;
}

PinnedHostMemory::~PinnedHostMemory() { free(); }

PinnedHostMemory::PinnedHostMemory(PinnedHostMemory&& other) noexcept
    : ctx_(std::move(other.ctx_)),
      host_(std::exchange(other.host_, nullptr)),
      device_(std::exchange(other.device_, 0)),
      size_(std::exchange(other.size_, 0)) {}

PinnedHostMemory& PinnedHostMemory::operator=(PinnedHostMemory&& other) noexcept {
  if (this != &other) {
    free();
    ctx_ = std::move(other.ctx_);
    host_ = std::exchange(other.host_, nullptr);
    device_ = std::exchange(other.device_, 0);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void PinnedHostMemory::free() noexcept {
  if (host_ != nullptr && ctx_) {
    const Driver& driver = ctx_->driver();
    // The allocating context must be current for the free to find it.
    auto scope = ScopedContext::enter(driver, ctx_->get());
    if (!scope) {
      log::error("leaking pinned host memory: {}", scope.status().message());
    } else if (const CUresult r = driver.api().cuMemFreeHost(host_); r != kCudaSuccess) {
      log::error("{}", driver.error(r, "cuMemFreeHost").message());
    }
  }
  host_ = nullptr;
  device_ = 0;
  size_ = 0;
  ctx_.reset();
}

}  // namespace fabric::cuda
