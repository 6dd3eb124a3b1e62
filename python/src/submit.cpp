#include "submit.hpp"

namespace py = pybind11;

namespace fabric::python {

Submission prepare_submission(PyEngine& engine, const py::object& callback, const char* op,
                              std::string what) {
  auto flag = std::make_shared<CompletionFlag>();
  Submission s;
  const void* id_of_engine = engine.hub_ptr().get();
  if (callback.is_none()) {
    s.on_done = OnDone(flag);
    s.transfer = std::make_shared<Transfer>(flag, id_of_engine, false, op);
    return s;
  }
  if (PyCallable_Check(callback.ptr()) == 0) throw py::type_error("callback must be callable");
  const std::uint64_t id = engine.hub().add(callback, std::move(what));
  s.callback_id = id;
  s.on_done = OnDone(DoneCallback([hub = engine.hub_ptr(), id, flag](const Status& status) {
    hub->invoke(id, true, [&](py::handle fn) { fn(exception_for(status)); });
    // After the callback, so a waiter sees everything the callback did.
    flag->complete(status);
  }));
  s.transfer = std::make_shared<Transfer>(flag, id_of_engine, true, op);
  return s;
}

}  // namespace fabric::python
