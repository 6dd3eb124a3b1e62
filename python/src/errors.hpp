#pragma once
// Status → Python exception. One exception class per Errc, all under
// fabric_lib.FabricError, so callers can catch as broadly as they like.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // every binding file converts optionals and vectors the same way

#include <utility>

#include "fabric/status.hpp"

namespace fabric::python {

void register_errors(pybind11::module_& m);

// An instance of the exception class for `status` (not raised); None when ok.
pybind11::object exception_for(const Status& status);

[[noreturn]] void raise_status(const Status& status);

// Raises the matching Python exception, e.g. InvalidArgumentError, with the
// Status message as its text.
[[noreturn]] void raise_error(Errc code, const char* message);

inline void check(const Status& status) {
  if (!status.ok()) raise_status(status);
}

template <typename T>
T take(Result<T>&& result) {
  if (!result.ok()) raise_status(result.status());
  return std::move(result).value();
}

}  // namespace fabric::python
