#include "waits.hpp"

#include <algorithm>
#include <cmath>

#include "errors.hpp"

namespace py = pybind11;

namespace fabric::python {
namespace {

// Long enough that waking costs nothing measurable, short enough that Ctrl-C
// feels immediate.
constexpr std::chrono::milliseconds kSlice{50};

thread_local const void* t_callback_engine = nullptr;

}  // namespace

std::optional<Status> wait_sliced(
    Timeout timeout, const std::function<std::optional<Status>(std::chrono::nanoseconds)>& step) {
  using Clock = std::chrono::steady_clock;
  if (timeout && (std::isnan(*timeout) || *timeout < 0)) {
    raise_error(Errc::invalid_argument, "timeout must be None or >= 0 seconds");
  }
  std::optional<Clock::time_point> deadline;
  if (timeout) {
    // Clamp absurd values so the arithmetic cannot overflow; a century is "forever".
    const double seconds = std::min(*timeout, 3.0e9);
    deadline = Clock::now() +
               std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  for (;;) {
    std::chrono::nanoseconds slice = kSlice;
    if (deadline) {
      slice = std::clamp<std::chrono::nanoseconds>(*deadline - Clock::now(),
                                                   std::chrono::nanoseconds(0), slice);
    }
    std::optional<Status> result;
    {
      py::gil_scoped_release release;
      result = step(slice);
    }
    if (result) return result;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (deadline && Clock::now() >= *deadline) return std::nullopt;
  }
}

bool python_finalizing() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

CallbackScope::CallbackScope(const void* engine) noexcept : previous_(t_callback_engine) {
  t_callback_engine = engine;
}
CallbackScope::~CallbackScope() { t_callback_engine = previous_; }

bool in_callback_of(const void* engine) noexcept {
  return engine != nullptr && t_callback_engine == engine;
}

}  // namespace fabric::python
