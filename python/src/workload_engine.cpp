#include "workload_engine.hpp"

#include "engine.hpp"
#include "errors.hpp"

namespace py = pybind11;

namespace fabric::python {

WorkloadEngine::WorkloadEngine(const py::object& engine,
                               const std::function<EngineConfig()>& own_config) {
  if (!engine.is_none()) {
    if (!py::isinstance<PyEngine>(engine)) {
      const std::string got = py::str(py::type::of(engine).attr("__name__"));
      raise_error(Errc::invalid_argument, ("engine= takes a fabric_lib.Engine, not " + got).c_str());
    }
    engine_ = engine.cast<PyEngine&>().share();  // ShutdownError for a stopped engine
    shared_ = engine;
    return;
  }
  const EngineConfig config = own_config();
  Result<std::unique_ptr<TransferEngine>> created = Status(Errc::invalid_argument, "not created");
  {
    py::gil_scoped_release release;
    created = TransferEngine::create(config);
  }
  engine_ = take(std::move(created));
}

WorkloadEngine::~WorkloadEngine() { close(); }

void WorkloadEngine::close() {
  {
    // Without the GIL: stopping joins the engine's threads, and for a shared engine whose owner
    // already stopped it this may be the last reference.
    py::gil_scoped_release release;
    if (engine_ && shared_.is_none()) engine_->stop();
    engine_.reset();
  }
  shared_ = py::none();
}

}  // namespace fabric::python
