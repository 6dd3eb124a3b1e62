#pragma once
// PyEngine: a TransferEngine owned by a Python object. Every call into the
// engine runs with the GIL released; the Python objects the engine depends on
// (callbacks, registered buffers) are let go only once it has stopped.

#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "callbacks.hpp"
#include "fabric/engine.hpp"

namespace fabric::python {

class PyEngine {
 public:
  explicit PyEngine(const EngineConfig& config);  // GIL held
  ~PyEngine();                                    // GIL held
  PyEngine(const PyEngine&) = delete;
  PyEngine& operator=(const PyEngine&) = delete;

  // Runs f(TransferEngine&) with the GIL released. Raises ShutdownError after stop().
  template <typename F>
  auto call_released(F&& f) {
    std::shared_ptr<TransferEngine> engine = live();
    pybind11::gil_scoped_release release;
    auto result = std::forward<F>(f)(*engine);
    // Dropped here, without the GIL: a concurrent stop() may have left us the last reference.
    engine.reset();
    return result;
  }

  // The engine itself, for a workload that runs on it (kv.Sender, moe.Buffer) and holds it as
  // long as it lives, past this object's stop() too. ShutdownError once stopped.
  [[nodiscard]] std::shared_ptr<TransferEngine> share() const { return live(); }

  [[nodiscard]] const NetAddr& address() const noexcept { return address_; }
  [[nodiscard]] const EngineConfig& config() const noexcept { return config_; }
  [[nodiscard]] bool stopped() const noexcept { return engine_ == nullptr; }
  [[nodiscard]] CallbackHub& hub() noexcept { return *hub_; }
  [[nodiscard]] const std::shared_ptr<CallbackHub>& hub_ptr() const noexcept { return hub_; }

  // Keeps `keeper` alive until the registration is gone (dereg_mr or stop).
  void pin(const void* registration, pybind11::object keeper);
  void unpin(const void* registration);

  // Drains or fails outstanding work, joins the engine's threads, then drops
  // the callbacks and registered objects. Idempotent; GIL held.
  void stop();

  // Stops every engine still running; registered with atexit so no engine
  // thread calls into an interpreter that is shutting down.
  static void stop_all();

 private:
  std::shared_ptr<TransferEngine> live() const;
  void stop_from_own_callback() noexcept;

  std::shared_ptr<TransferEngine> engine_;  // null once stopped; guarded by the GIL
  NetAddr address_;
  EngineConfig config_;
  std::shared_ptr<CallbackHub> hub_ = std::make_shared<CallbackHub>();
  std::unordered_map<const void*, pybind11::object> pinned_;  // guarded by the GIL
  std::mutex stop_mutex_;  // one stop() at a time; taken without the GIL
};

void bind_engine(pybind11::module_& m);

}  // namespace fabric::python
