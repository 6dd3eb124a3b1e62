#include "transfer.hpp"

#include <string>

#include "errors.hpp"

namespace py = pybind11;

namespace fabric::python {
namespace {

std::string seconds_text(Timeout timeout) {
  return timeout ? py::str(py::float_(*timeout)).cast<std::string>() + " s" : "unbounded";
}

}  // namespace

Status Transfer::wait_status(Timeout timeout) const {
  if (flag_->done()) return flag_->status();
  if (via_callback_ && in_callback_of(engine_)) {
    raise_error(Errc::invalid_argument,
                "waiting, inside one of the engine's callbacks, for a transfer whose callback "
                "runs on that same thread would deadlock; poll done() or wait elsewhere");
  }
  auto flag = flag_;
  auto result =
      wait_sliced(timeout, [flag](std::chrono::nanoseconds slice) -> std::optional<Status> {
        // The request itself may fail with Errc::timeout; only done() tells them apart.
        (void)flag->wait(slice);
        if (flag->done()) return flag->status();
        return std::nullopt;
      });
  if (!result) {
    raise_error(Errc::timeout,
                (std::string(op_) + " not complete within " + seconds_text(timeout)).c_str());
  }
  return *result;
}

void Transfer::wait(Timeout timeout) const { check(wait_status(timeout)); }

py::object Transfer::exception(Timeout timeout) const {
  return exception_for(wait_status(timeout));
}

void PyImmCounter::wait(std::uint64_t n, Timeout timeout) const {
  auto counter = counter_;
  auto result =
      wait_sliced(timeout, [counter, n](std::chrono::nanoseconds slice) -> std::optional<Status> {
        if (counter->wait(n, slice).ok()) return Status::success();
        return std::nullopt;
      });
  if (!result) {
    raise_error(Errc::timeout, ("imm " + std::to_string(counter_->imm()) + " counter at " +
                                std::to_string(counter_->value()) + ", not " + std::to_string(n) +
                                ", after " + seconds_text(timeout))
                                   .c_str());
  }
}

void PyImmCounter::wait_and_consume(std::uint64_t n, Timeout timeout) {
  auto counter = counter_;
  auto result =
      wait_sliced(timeout, [counter, n](std::chrono::nanoseconds slice) -> std::optional<Status> {
        if (counter->wait_and_consume(n, slice).ok()) return Status::success();
        return std::nullopt;
      });
  if (!result) {
    raise_error(Errc::timeout, ("imm " + std::to_string(counter_->imm()) + " counter at " +
                                std::to_string(counter_->value()) + ", could not consume " +
                                std::to_string(n) + " within " + seconds_text(timeout))
                                   .c_str());
  }
}

void bind_transfer(py::module_& m) {
  py::class_<Transfer, std::shared_ptr<Transfer>>(
      m, "Transfer",
      "One submitted request. Completion is reported exactly once; done() polls it and wait() "
      "blocks for it.")
      .def("done", &Transfer::done,
           "True once the request has completed, successfully or not. Never blocks.")
      .def("wait", &Transfer::wait, py::arg("timeout") = py::none(),
           "Blocks until the request completes, with the GIL released; Ctrl-C interrupts it. "
           "Raises the request's FabricError if it failed, or FabricTimeoutError if `timeout` "
           "seconds pass first (the request is then still outstanding). With a callback, "
           "returns after the callback has returned.")
      .def("exception", &Transfer::exception, py::arg("timeout") = py::none(),
           "Waits like wait(), then returns the request's error as an exception instance, or "
           "None if it succeeded.")
      .def(
          "__await__",
          [](py::object self) {
            return py::module_::import("fabric_lib._aio").attr("future_of")(self).attr(
                "__await__")();
          },
          "Awaits the request on the running asyncio loop, with no thread per request: resolves "
          "once it completes, raising its FabricError if it failed. A transfer is awaited on "
          "one loop; wait() still works beside it.")
      .def("__repr__", [](const Transfer& t) {
        return std::string("<fabric_lib.Transfer ") + t.op() + (t.done() ? " done>" : " pending>");
      });

  py::class_<PyImmCounter, std::shared_ptr<PyImmCounter>>(
      m, "ImmCounter",
      "Pollable count of WRITE-with-immediate arrivals of one imm value (Engine.imm_counter).")
      .def_property_readonly("imm", &PyImmCounter::imm, "The immediate value it counts.")
      .def_property_readonly("value", &PyImmCounter::value, "Arrivals not yet consumed.")
      .def("try_consume", &PyImmCounter::try_consume, py::arg("n") = 1,
           "Takes n arrivals if at least n are there; returns whether it did.")
      .def("wait", &PyImmCounter::wait, py::arg("n"), py::arg("timeout") = py::none(),
           "Blocks until value >= n, without consuming, with the GIL released; Ctrl-C "
           "interrupts it. Raises FabricTimeoutError if `timeout` seconds pass first.")
      .def("wait_and_consume", &PyImmCounter::wait_and_consume, py::arg("n"),
           py::arg("timeout") = py::none(),
           "Blocks until n arrivals can be taken, then takes them, atomically with respect to "
           "other consumers. Raises FabricTimeoutError if `timeout` seconds pass first.")
      .def("__repr__", [](const PyImmCounter& c) {
        return "<fabric_lib.ImmCounter imm=" + std::to_string(c.imm()) +
               " value=" + std::to_string(c.value()) + ">";
      });
}

}  // namespace fabric::python
