#include "callbacks.hpp"

#include <exception>
#include <utility>

#include "waits.hpp"

namespace py = pybind11;

namespace fabric::python {

CallbackHub::~CallbackHub() {
  if (entries_.empty()) return;
  if (python_finalizing()) {
    // Decref'ing now could run arbitrary finalizers on a dying interpreter.
    for (auto& [id, entry] : entries_) entry.fn.release();
    return;
  }
  py::gil_scoped_acquire gil;
  entries_.clear();
}

std::uint64_t CallbackHub::add(py::object fn, std::string what) {
  const std::uint64_t id = next_id_++;
  entries_.emplace(id, Entry{std::move(fn), std::move(what)});
  return id;
}

void CallbackHub::erase(std::uint64_t id) { entries_.erase(id); }

void CallbackHub::clear() {
  // Move out first: a finalizer run by the decref may call back into the hub.
  auto doomed = std::move(entries_);
  entries_.clear();
  doomed.clear();
}

void CallbackHub::invoke(std::uint64_t id, bool once,
                         const std::function<void(py::handle fn)>& call) {
  if (python_finalizing()) return;
  py::gil_scoped_acquire gil;
  CallbackScope scope(this);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;  // stop() already let go of it
  py::object fn = it->second.fn;
  std::string what = once ? std::move(it->second.what) : it->second.what;
  if (once) entries_.erase(it);
  try {
    call(fn);
  } catch (py::error_already_set& error) {
    report(what, error);
  } catch (const std::exception& error) {
    report(what, error.what());
  } catch (...) {
    report(what, "a non-standard C++ exception");
  }
}

void CallbackHub::report(const std::string& what, py::error_already_set& error) {
  errors_.fetch_add(1, std::memory_order_relaxed);
  // An exception raised from C has no traceback; logging wants None then.
  auto or_none = [](const py::object& o) -> py::object { return o ? o : py::none(); };
  try {
    py::object logger = py::module_::import("logging").attr("getLogger")("fabric_lib");
    logger.attr("error")(
        "exception in the callback of %s; the engine carries on", what,
        py::arg("exc_info") =
            py::make_tuple(or_none(error.type()), or_none(error.value()), or_none(error.trace())));
  } catch (py::error_already_set& failed) {
    failed.discard_as_unraisable("fabric_lib: reporting a callback's exception");
  } catch (const std::exception&) {  // nothing sensible is left to report it with
  }
}

void CallbackHub::report(const std::string& what, const char* message) {
  errors_.fetch_add(1, std::memory_order_relaxed);
  try {
    py::object logger = py::module_::import("logging").attr("getLogger")("fabric_lib");
    logger.attr("error")("error in the callback of %s: %s; the engine carries on", what, message);
  } catch (py::error_already_set& failed) {
    failed.discard_as_unraisable("fabric_lib: reporting a callback's error");
  } catch (const std::exception&) {  // nothing sensible is left to report it with
  }
}

}  // namespace fabric::python
