#pragma once
// Python callables that an engine calls back. The C++ engine's std::functions
// capture only a shared_ptr to the hub and an id, never a Python object, so
// the engine may copy and destroy them on its own threads without the GIL.

#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

namespace fabric::python {

class CallbackHub {
 public:
  CallbackHub() = default;
  ~CallbackHub();
  CallbackHub(const CallbackHub&) = delete;
  CallbackHub& operator=(const CallbackHub&) = delete;

  // GIL required. `what` names the request in error reports.
  std::uint64_t add(pybind11::object fn, std::string what);
  void erase(std::uint64_t id);
  // Drops every callable; only once the engine can no longer call back.
  void clear();

  // Engine threads: takes the GIL, finds the callable (and forgets it when
  // `once`), and runs `call` with it. A Python exception is logged with its
  // traceback and the request, never propagated. Does nothing while the
  // interpreter shuts down.
  void invoke(std::uint64_t id, bool once, const std::function<void(pybind11::handle fn)>& call);

  // How many callbacks raised; they were logged to the "fabric_lib" logger.
  [[nodiscard]] std::uint64_t errors() const noexcept {
    return errors_.load(std::memory_order_relaxed);
  }

 private:
  struct Entry {
    pybind11::object fn;
    std::string what;
  };
  void report(const std::string& what, pybind11::error_already_set& error);
  void report(const std::string& what, const char* message);

  std::unordered_map<std::uint64_t, Entry> entries_;  // guarded by the GIL
  std::uint64_t next_id_ = 1;
  std::atomic<std::uint64_t> errors_{0};
};

}  // namespace fabric::python
