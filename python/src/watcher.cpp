#include "watcher.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "engine.hpp"
#include "errors.hpp"
#include "fabric/watcher.hpp"

namespace py = pybind11;

namespace fabric::python {
namespace {

class PyWatcher {
 public:
  PyWatcher(Watcher watcher, std::shared_ptr<CallbackHub> hub, std::uint64_t id)
      : watcher_(std::move(watcher)), hub_(std::move(hub)), id_(id) {}

  ~PyWatcher() {
    // release() waits for a running callback, which may be waiting for the GIL.
    py::gil_scoped_release release;
    watcher_.reset();
  }

  void release() {
    {
      py::gil_scoped_release release;
      if (watcher_) watcher_->release();
    }
    hub_->erase(id_);
  }

  [[nodiscard]] bool active() const noexcept { return watcher_ && watcher_->active(); }
  [[nodiscard]] std::uintptr_t word() const noexcept {
    return watcher_ ? reinterpret_cast<std::uintptr_t>(watcher_->word()) : 0;
  }
  [[nodiscard]] std::optional<std::uintptr_t> device_word() const noexcept {
    if (!watcher_ || watcher_->device_word() == nullptr) return std::nullopt;
    return reinterpret_cast<std::uintptr_t>(watcher_->device_word());
  }

  void store(std::uint64_t value) const {
    if (!active()) {
      raise_error(Errc::invalid_argument,
                  "the watcher is released; its word may already belong to another watcher");
    }
    // The contract: one aligned 64-bit store, with release ordering (docs/watcher.md).
    __atomic_store_n(watcher_->word(), value, __ATOMIC_RELEASE);
  }

  [[nodiscard]] std::uint64_t load() const {
    if (!watcher_ || watcher_->word() == nullptr) {
      raise_error(Errc::invalid_argument, "the watcher has no word");
    }
    return __atomic_load_n(watcher_->word(), __ATOMIC_ACQUIRE);
  }

 private:
  std::optional<Watcher> watcher_;
  std::shared_ptr<CallbackHub> hub_;
  std::uint64_t id_;
};

WatcherMemory to_memory(const std::string& text) {
  if (text == "host") return WatcherMemory::host;
  if (text == "cuda_mapped") return WatcherMemory::cuda_mapped;
  raise_error(Errc::invalid_argument,
              ("memory must be \"host\" or \"cuda_mapped\", not \"" + text + "\"").c_str());
}

std::unique_ptr<PyWatcher> alloc_uvm_watcher(PyEngine& self, const py::object& callback,
                                             const std::string& memory) {
  if (PyCallable_Check(callback.ptr()) == 0) throw py::type_error("callback must be callable");
  const WatcherMemory kind = to_memory(memory);
  auto hub = self.hub_ptr();
  const std::uint64_t id = self.hub().add(callback, "watcher");
  WatchCallback on_change = [hub, id](std::uint64_t old_value, std::uint64_t new_value) {
    bool keep = true;  // a callback that raised keeps watching, as in C++
    hub->invoke(id, false, [&](py::handle fn) {
      py::object result = fn(old_value, new_value);
      // None (no return statement) keeps watching; only a false value stops.
      keep = result.is_none() || PyObject_IsTrue(result.ptr()) != 0;
      if (!keep) hub->erase(id);
    });
    return keep;
  };
  Result<Watcher> made = self.call_released(
      [&](TransferEngine& e) { return e.alloc_uvm_watcher(std::move(on_change), kind); });
  if (!made.ok()) {
    self.hub().erase(id);
    raise_status(made.status());
  }
  return std::make_unique<PyWatcher>(std::move(made).value(), std::move(hub), id);
}

}  // namespace

void bind_watcher(py::module_& m) {
  py::class_<PyWatcher>(m, "Watcher",
                        "A watched 64-bit word (Engine.alloc_uvm_watcher). A GPU kernel or a "
                        "host thread writes it; the engine's watcher thread calls back on each "
                        "observed change. Releases itself when garbage-collected.")
      .def_property_readonly("word", &PyWatcher::word,
                             "Host address of the word (0 once the handle is empty).")
      .def_property_readonly("device_word", &PyWatcher::device_word,
                             "The address a kernel writes, for \"cuda_mapped\" memory; else None.")
      .def_property_readonly("active", &PyWatcher::active,
                             "False once released or once the callback returned False.")
      .def("store", &PyWatcher::store, py::arg("value"),
           "Writes the word from the host: one aligned 64-bit store with release ordering.")
      .def("load", &PyWatcher::load, "Reads the word (what writers last stored).")
      .def("release", &PyWatcher::release,
           "Stops watching. After it returns no callback of this watcher starts or still runs "
           "(unless called from that callback). Idempotent.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyWatcher& w, const py::args&) {
        w.release();
        return false;
      });
}

void bind_engine_watcher(py::class_<PyEngine>& engine) {
  engine.def("alloc_uvm_watcher", &alloc_uvm_watcher, py::arg("callback"),
             py::arg("memory") = "host",
             "A watched 64-bit word starting at 0. callback(old, new) runs on the engine's "
             "watcher thread for each observed change (values in between may be skipped); "
             "returning False stops watching. memory: \"host\" or \"cuda_mapped\" (needs CUDA).");
}

}  // namespace fabric::python
