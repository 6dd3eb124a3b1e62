#include "cuda/driver.hpp"

#include <fmt/format.h>

#include <mutex>

namespace fabric::cuda {

namespace {

// For drivers (and the toolkit's stub) whose cuGetErrorString does not know
// the code.
const char* known_error_name(CUresult r) {
  switch (r) {
    case kCudaErrorStubLibrary:
      return "CUDA_ERROR_STUB_LIBRARY: the toolkit's stub libcuda, not a driver";
    case kCudaErrorInsufficientDriver: return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case kCudaErrorNoDevice: return "CUDA_ERROR_NO_DEVICE";
    case kCudaErrorNotSupported: return "CUDA_ERROR_NOT_SUPPORTED";
    default: return "unknown CUDA error";
  }
}

}  // namespace

Result<std::unique_ptr<Driver>> Driver::load(const std::string& path) {
  auto lib = DlLibrary::open(path);
  if (!lib) return lib.status();
  std::unique_ptr<Driver> d(new Driver(std::move(lib).value()));
  DriverApi& a = d->api_;
  const DlLibrary& l = d->library_;
  struct Required {
    bool found;
    const char* name;
  };
  // Versioned names first: the plain names stay exported for old binaries
  // and may keep older semantics.
  const Required required[] = {
      {l.resolve(a.cuInit, {"cuInit"}), "cuInit"},
      {l.resolve(a.cuDeviceGetCount, {"cuDeviceGetCount"}), "cuDeviceGetCount"},
      {l.resolve(a.cuDeviceGet, {"cuDeviceGet"}), "cuDeviceGet"},
      {l.resolve(a.cuCtxGetCurrent, {"cuCtxGetCurrent"}), "cuCtxGetCurrent"},
      {l.resolve(a.cuCtxSetCurrent, {"cuCtxSetCurrent"}), "cuCtxSetCurrent"},
      {l.resolve(a.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"}),
       "cuDevicePrimaryCtxRetain"},
      {l.resolve(a.cuDevicePrimaryCtxRelease,
               {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}),
       "cuDevicePrimaryCtxRelease"},
      {l.resolve(a.cuMemHostAlloc, {"cuMemHostAlloc"}), "cuMemHostAlloc"},
      {l.resolve(a.cuMemFreeHost, {"cuMemFreeHost"}), "cuMemFreeHost"},
      {l.resolve(a.cuMemHostGetDevicePointer,
               {"cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer"}),
       "cuMemHostGetDevicePointer"},
      {l.resolve(a.cuMemGetAddressRange, {"cuMemGetAddressRange_v2", "cuMemGetAddressRange"}),
       "cuMemGetAddressRange"},
      {l.resolve(a.cuGetErrorString, {"cuGetErrorString"}), "cuGetErrorString"},
  };
  for (const auto& r : required) {
    if (!r.found) {
      return Status(Errc::unsupported, fmt::format("{} lacks {}: driver too old", path, r.name));
    }
  }
  l.resolve(a.cuMemGetHandleForAddressRange, {"cuMemGetHandleForAddressRange"});
  l.resolve(a.cuDeviceGetPCIBusId, {"cuDeviceGetPCIBusId"});
  return d;
}

Status Driver::init() const {
  const CUresult r = api_.cuInit(0);
  if (r == kCudaErrorNoDevice) return Status(Errc::unsupported, "no CUDA device");
  if (r != kCudaSuccess) {
    const Status s = error(r, "cuInit");
    return Status(Errc::unsupported, s.message());
  }
  int count = 0;
  const CUresult c = api_.cuDeviceGetCount(&count);
  if (c != kCudaSuccess) return Status(Errc::unsupported, error(c, "cuDeviceGetCount").message());
  if (count <= 0) return Status(Errc::unsupported, "no CUDA device");
  return Status::success();
}

Status Driver::error(CUresult result, std::string_view call) const {
  const char* text = nullptr;
  if (api_.cuGetErrorString == nullptr || api_.cuGetErrorString(result, &text) != kCudaSuccess ||
      text == nullptr) {
    text = known_error_name(result);
  }
  const Errc code = (result == kCudaErrorNoDevice || result == kCudaErrorNotSupported ||
                     result == kCudaErrorStubLibrary || result == kCudaErrorInsufficientDriver)
                        ? Errc::unsupported
                        : Errc::provider;
  return Status(code, fmt::format("{} failed: {} ({})", call, text, result));
}

Result<const Driver*> driver() {
  static std::once_flag once;
  static const Driver* loaded = nullptr;
  static Status failure;
  std::call_once(once, [] {
    auto d = Driver::load(kDriverLibrary);
    if (!d) {
      failure = d.status();
      return;
    }
    if (Status s = (*d)->init(); !s.ok()) {
      failure = std::move(s);
      return;
    }
    // Never destroyed, so never unloaded: pinned buffers freed from other
    // static destructors at exit still need the driver mapped.
    loaded = std::move(d).value().release();
  });
  if (loaded == nullptr) return failure;
  return loaded;
}

}  // namespace fabric::cuda
