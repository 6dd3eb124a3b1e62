#pragma once
// Engine.alloc_uvm_watcher for Python: a watched 64-bit word whose callback
// runs, with the GIL, on the engine's watcher thread.

#include <pybind11/pybind11.h>

#include "engine.hpp"

namespace fabric::python {

void bind_watcher(pybind11::module_& m);
void bind_engine_watcher(pybind11::class_<PyEngine>& engine);

}  // namespace fabric::python
