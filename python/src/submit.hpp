#pragma once
// How a submission completes for Python: a Transfer backed by a
// CompletionFlag, set by the worker directly or, when the caller gave a
// callback, by the callback thread once the callback has returned.

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "engine.hpp"
#include "errors.hpp"
#include "fabric/completion.hpp"
#include "transfer.hpp"

namespace fabric::python {

struct Submission {
  OnDone on_done;
  std::shared_ptr<Transfer> transfer;
  std::optional<std::uint64_t> callback_id;
};

// `what` names the request in the log should the callback raise.
Submission prepare_submission(PyEngine& engine, const pybind11::object& callback, const char* op,
                              std::string what);

// describe() -> std::string runs only when there is a callback, so plain
// submissions pay nothing for it. call(TransferEngine&, OnDone) -> Status runs
// with the GIL released; it must not touch Python objects.
template <typename Describe, typename Call>
std::shared_ptr<Transfer> submit(PyEngine& engine, const pybind11::object& callback, const char* op,
                                 Describe&& describe, Call&& call) {
  Submission s =
      prepare_submission(engine, callback, op, callback.is_none() ? std::string() : describe());
  const Status status = engine.call_released(
      [&](TransferEngine& e) { return std::forward<Call>(call)(e, std::move(s.on_done)); });
  if (!status.ok()) {
    // Nothing was queued, so the callback will never run.
    if (s.callback_id) engine.hub().erase(*s.callback_id);
    raise_status(status);
  }
  return s.transfer;
}

}  // namespace fabric::python
