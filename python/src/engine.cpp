#include "engine.hpp"

#include <thread>
#include <unordered_set>
#include <vector>

#include "errors.hpp"
#include "waits.hpp"

namespace py = pybind11;

namespace fabric::python {
namespace {

// Engines not yet stopped, for stop_all(); guarded by the GIL.
std::unordered_set<PyEngine*>& running() {
  static auto* engines = new std::unordered_set<PyEngine*>();  // never destroyed: used at exit
  return *engines;
}

}  // namespace

PyEngine::PyEngine(const EngineConfig& config) {
  Result<std::unique_ptr<TransferEngine>> created = Status(Errc::invalid_argument, "not created");
  {
    py::gil_scoped_release release;
    created = TransferEngine::create(config);
  }
  engine_ = take(std::move(created));
  address_ = engine_->main_address();
  config_ = engine_->config();
  running().insert(this);
}

PyEngine::~PyEngine() {
  running().erase(this);
  if (!engine_) return;
  if (in_callback_of(hub_.get())) {
    stop_from_own_callback();
    return;
  }
  try {
    stop();
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("fabric_lib.Engine destructor");
  }
}

std::shared_ptr<TransferEngine> PyEngine::live() const {
  if (!engine_) raise_error(Errc::shutdown, "the engine is stopped");
  return engine_;
}

void PyEngine::pin(const void* registration, py::object keeper) {
  pinned_[registration] = std::move(keeper);
}

void PyEngine::unpin(const void* registration) { pinned_.erase(registration); }

void PyEngine::stop() {
  if (in_callback_of(hub_.get())) {
    raise_error(Errc::invalid_argument,
                "stop() cannot run on the engine's own callback thread (it joins that thread); "
                "call it from another thread");
  }
  {
    py::gil_scoped_release release;
    stop_mutex_.lock();
  }
  std::lock_guard lock(stop_mutex_, std::adopt_lock);
  running().erase(this);
  std::shared_ptr<TransferEngine> engine = std::move(engine_);
  if (engine) {
    py::gil_scoped_release release;
    engine->stop();
    engine.reset();
  }
  // The engine has joined its threads: nothing can call back or write into
  // registered memory any more.
  auto pinned = std::move(pinned_);
  pinned_.clear();
  pinned.clear();
  hub_->clear();
}

void PyEngine::stop_from_own_callback() noexcept {
  // The last reference went away inside one of this engine's callbacks: the
  // engine can only be joined from another thread, and only once this
  // callback has returned. Hand everything to a thread that does both.
  auto engine = std::move(engine_);
  auto pinned = std::make_shared<std::unordered_map<const void*, py::object>>(std::move(pinned_));
  std::thread([engine = std::move(engine), pinned, hub = hub_]() mutable {
    engine->stop();
    engine.reset();
    if (python_finalizing()) {
      for (auto& [reg, keeper] : *pinned) keeper.release();
      pinned->clear();
      return;
    }
    py::gil_scoped_acquire gil;
    pinned->clear();
    hub->clear();
  }).detach();
}

void PyEngine::stop_all() {
  std::vector<PyEngine*> engines(running().begin(), running().end());
  for (PyEngine* e : engines) {
    // An earlier stop() released the GIL, so another thread may have destroyed this one.
    if (running().count(e) == 0) continue;
    try {
      e->stop();
    } catch (py::error_already_set& error) {
      error.discard_as_unraisable("fabric_lib: stopping engines at exit");
    }
  }
}

}  // namespace fabric::python
