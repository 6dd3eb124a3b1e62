#pragma once
// Run-time loader of GDRCopy (libgdrapi), which maps GPU memory into the CPU's
// address space so the host can set a flag a kernel spins on without a copy
// engine round trip.

#include <memory>
#include <string>

#include "cuda/dl_library.hpp"
#include "cuda/gdr_types.hpp"
#include "fabric/status.hpp"

namespace fabric::cuda {

class GdrLibrary {
 public:
  // dlopen()s `path` and resolves every entry point; opens no device.
  static Result<std::unique_ptr<GdrLibrary>> load(const std::string& path);
  [[nodiscard]] const GdrApi& api() const noexcept { return api_; }

 private:
  explicit GdrLibrary(DlLibrary library) : library_(std::move(library)) {}
  DlLibrary library_;
  GdrApi api_;
};

// The process-wide library: libgdrapi.so.2, else libgdrapi.so; loaded once,
// the outcome kept. Errc::unsupported when neither is installed.
Result<const GdrLibrary*> gdr_library();

}  // namespace fabric::cuda
