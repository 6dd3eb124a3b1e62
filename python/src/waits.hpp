#pragma once
// Blocking from Python: never with the GIL held, never uninterruptible,
// never unbounded unless the caller asked for it.

#include <pybind11/pybind11.h>

#include <chrono>
#include <functional>
#include <optional>

#include "fabric/status.hpp"

namespace fabric::python {

// A Python timeout in seconds: None waits without limit, negative is an error.
using Timeout = std::optional<double>;

// Calls step(slice) with the GIL released until it yields a Status or the
// timeout passes (then nullopt). Between slices, with the GIL held, pending
// signals are handled, so Ctrl-C raises KeyboardInterrupt within a slice.
// step must not touch Python objects.
std::optional<Status> wait_sliced(
    Timeout timeout, const std::function<std::optional<Status>(std::chrono::nanoseconds)>& step);

// True while the interpreter is shutting down: engine threads must then not
// try to take the GIL (the interpreter would end them mid-call).
bool python_finalizing() noexcept;

// Marks the current thread as running a Python callback of `engine`, so
// calls that would wait for that engine's callback thread (stop(), waiting on
// a callback transfer) can refuse instead of deadlocking.
class CallbackScope {
 public:
  explicit CallbackScope(const void* engine) noexcept;
  ~CallbackScope();
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;

 private:
  const void* previous_;
};

bool in_callback_of(const void* engine) noexcept;

}  // namespace fabric::python
