#pragma once
// RAII for CUDA contexts: a retained primary context, and a scope that makes
// a context current on this thread and puts the caller's back afterwards, so
// library calls never change the application's current context.

#include <memory>

#include "cuda/driver.hpp"

namespace fabric::cuda {

class PrimaryContext {
 public:
  // Retains device `ordinal`'s primary context (the one the runtime API uses).
  static Result<std::shared_ptr<PrimaryContext>> retain(const Driver& driver, int ordinal);
  ~PrimaryContext();
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;

  [[nodiscard]] CUcontext get() const noexcept { return ctx_; }
  [[nodiscard]] CUdevice device() const noexcept { return device_; }
  [[nodiscard]] const Driver& driver() const noexcept { return *driver_; }

 private:
  PrimaryContext(const Driver& driver, CUdevice device, CUcontext ctx) noexcept
      : driver_(&driver), device_(device), ctx_(ctx) {}
  const Driver* driver_;
  CUdevice device_;
  CUcontext ctx_;
};

class ScopedContext {
 public:
  static Result<ScopedContext> enter(const Driver& driver, CUcontext ctx);
  ~ScopedContext();
  ScopedContext(ScopedContext&& other) noexcept;
  ScopedContext& operator=(ScopedContext&&) = delete;
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  ScopedContext(const Driver& driver, CUcontext previous) noexcept
      : driver_(&driver), previous_(previous) {}
  const Driver* driver_ = nullptr;  // nullptr once moved from
  CUcontext previous_ = nullptr;
};

}  // namespace fabric::cuda
