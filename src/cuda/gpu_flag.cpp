#include "fabric/gpu_flag.hpp"

#include <fmt/format.h>

#include <atomic>
#include <mutex>

#include "cuda/device_range.hpp"
#include "cuda/driver.hpp"
#include "cuda/gdr_mapping.hpp"
#include "cuda/primary_context.hpp"

namespace fabric {

struct GpuFlag::Impl {
  void* word = nullptr;
  Device device;
  std::shared_ptr<cuda::PrimaryContext> context;  // keeps the allocation's context alive
  cuda::GdrMapping mapping;
  std::mutex store_mutex;  // gdr_copy_to_mapping is not documented thread-safe
};

Result<std::shared_ptr<GpuFlag>> GpuFlag::map(void* device_word, Device device) {
  if (device.is_host()) {
    return Status(Errc::invalid_argument, "GpuFlag::map needs a CUDA device, not host");
  }
  const auto address = reinterpret_cast<cuda::CUdeviceptr>(device_word);
  if (address == 0 || address % sizeof(std::uint64_t) != 0) {
    return Status(Errc::invalid_argument,
                  fmt::format("GpuFlag word {} is not 8-byte aligned device memory", device_word));
  }
  auto driver = cuda::driver();
  if (!driver) {
    return Status(Errc::unsupported,
                  fmt::format("GpuFlag on {}: {}", device.to_string(), driver.status().message()));
  }
  auto impl = std::make_unique<Impl>();
  impl->word = device_word;
  impl->device = device;
  auto context = cuda::PrimaryContext::retain(**driver, device.index);
  if (!context) return context.status();
  impl->context = std::move(context).value();
  {
    auto scope = cuda::ScopedContext::enter(**driver, impl->context->get());
    if (!scope) return scope.status();
    if (auto range = cuda::address_range(**driver, address); !range) {
      return Status(Errc::invalid_argument,
                    fmt::format("GpuFlag word {} is not memory of {}: {}", device_word,
                                device.to_string(), range.status().message()));
    }
  }
  auto session = cuda::GdrSession::open();
  if (!session) return session.status();
  auto mapping = cuda::GdrMapping::map(std::move(session).value(), address, sizeof(std::uint64_t));
  if (!mapping) return mapping.status();
  impl->mapping = std::move(mapping).value();
  return std::shared_ptr<GpuFlag>(new GpuFlag(std::move(impl)));
}

GpuFlag::GpuFlag(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuFlag::~GpuFlag() = default;

Status GpuFlag::store(std::uint64_t value) {
  std::lock_guard lock(impl_->store_mutex);
  Status st = impl_->mapping.copy_to(0, &value, sizeof value);
  // Order the store before whatever the caller signals next.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return st;
}

void* GpuFlag::device_word() const noexcept { return impl_->word; }
Device GpuFlag::device() const noexcept { return impl_->device; }

}  // namespace fabric
