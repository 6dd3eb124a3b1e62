#pragma once
// Run-time loader of the CUDA driver (libcuda.so.1). Nothing here runs until a
// GPU feature is used, so hosts without a GPU never see an error.

#include <memory>
#include <string>
#include <string_view>

#include "cuda/dl_library.hpp"
#include "cuda/driver_types.hpp"
#include "fabric/status.hpp"

namespace fabric::cuda {

inline constexpr const char* kDriverLibrary = "libcuda.so.1";

class Driver {
 public:
  // dlopen()s `path` and resolves every entry point; does not call cuInit.
  static Result<std::unique_ptr<Driver>> load(const std::string& path);

  // cuInit(0), then at least one device; Errc::unsupported otherwise.
  [[nodiscard]] Status init() const;
  [[nodiscard]] const DriverApi& api() const noexcept { return api_; }
  // Non-ok Status for a failed call, naming the call and the driver's text.
  [[nodiscard]] Status error(CUresult result, std::string_view call) const;
  [[nodiscard]] Status check(CUresult result, std::string_view call) const {
    return result == kCudaSuccess ? Status::success() : error(result, call);
  }

 private:
  explicit Driver(DlLibrary library) : library_(std::move(library)) {}
  DlLibrary library_;
  DriverApi api_;
};

// The process-wide driver, loaded from kDriverLibrary and initialised on the
// first call (thread-safe). The outcome of that attempt is kept for the life
// of the process: a GPU does not appear later.
Result<const Driver*> driver();

}  // namespace fabric::cuda
