#pragma once

#include <pybind11/pybind11.h>

namespace fabric::python {

void bind_values(pybind11::module_& m);

}  // namespace fabric::python
