#pragma once
// The engine a workload binding (kv.Sender and Receiver, the moe Group) runs on: the
// fabric_lib.Engine the caller passed (engine=), held, the Python object and its TransferEngine,
// for as long as the workload; or, when none was passed, one of the workload's own made from its
// options (the convenience), stopped when the workload closes.

#include <pybind11/pybind11.h>

#include <functional>
#include <memory>

#include "fabric/engine.hpp"

namespace fabric::python {

class WorkloadEngine {
 public:
  // engine: a fabric_lib.Engine, or None to create one from own_config(). GIL held.
  WorkloadEngine(const pybind11::object& engine, const std::function<EngineConfig()>& own_config);
  ~WorkloadEngine();  // GIL held
  WorkloadEngine(const WorkloadEngine&) = delete;
  WorkloadEngine& operator=(const WorkloadEngine&) = delete;

  [[nodiscard]] TransferEngine& get() const noexcept { return *engine_; }
  [[nodiscard]] bool shared() const noexcept { return !shared_.is_none(); }
  [[nodiscard]] explicit operator bool() const noexcept { return engine_ != nullptr; }

  // An own engine is stopped; a shared one is let go (its owner stops it). Idempotent; GIL held.
  void close();

 private:
  std::shared_ptr<TransferEngine> engine_;  // null once closed
  pybind11::object shared_ = pybind11::none();  // the caller's fabric_lib.Engine, None for an own one
};

}  // namespace fabric::python
