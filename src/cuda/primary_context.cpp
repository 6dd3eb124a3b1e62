#include "cuda/primary_context.hpp"

#include <utility>

#include "common/log.hpp"

namespace fabric::cuda {

Result<std::shared_ptr<PrimaryContext>> PrimaryContext::retain(const Driver& driver, int ordinal) {
  const DriverApi& api = driver.api();
  CUdevice device = 0;
  if (Status s = driver.check(api.cuDeviceGet(&device, ordinal), "cuDeviceGet"); !s.ok()) {
    return s;
  }
  CUcontext ctx = nullptr;
  if (Status s = driver.check(api.cuDevicePrimaryCtxRetain(&ctx, device),
                              "cuDevicePrimaryCtxRetain");
      !s.ok()) {
    return s;
  }
  return std::shared_ptr<PrimaryContext>(new PrimaryContext(driver, device, ctx));
}

PrimaryContext::~PrimaryContext() {
  const CUresult r = driver_->api().cuDevicePrimaryCtxRelease(device_);
  if (r != kCudaSuccess) {
    log::warn("{}", driver_->error(r, "cuDevicePrimaryCtxRelease").message());
  }
}

Result<ScopedContext> ScopedContext::enter(const Driver& driver, CUcontext ctx) {
  const DriverApi& api = driver.api();
  CUcontext previous = nullptr;
  if (Status s = driver.check(api.cuCtxGetCurrent(&previous), "cuCtxGetCurrent"); !s.ok()) {
    return s;
  }
  if (previous != ctx) {
    if (Status s = driver.check(api.cuCtxSetCurrent(ctx), "cuCtxSetCurrent"); !s.ok()) return s;
  }
  return ScopedContext(driver, previous);
}

ScopedContext::ScopedContext(ScopedContext&& other) noexcept
    : driver_(std::exchange(other.driver_, nullptr)), previous_(other.previous_) {}

ScopedContext::~ScopedContext() {
  if (driver_ == nullptr) return;
  const CUresult r = driver_->api().cuCtxSetCurrent(previous_);
  if (r != kCudaSuccess) log::warn("{}", driver_->error(r, "cuCtxSetCurrent").message());
}

}  // namespace fabric::cuda
