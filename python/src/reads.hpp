#pragma once
// Engine.single_read / Engine.paged_reads: RDMA READs from a peer's memory (an MrDesc it
// registered with remote_read=True) into a local registration, returning a Transfer like the
// writes. Bound onto the Engine class after bind_engine() made it.

#include <pybind11/pybind11.h>

namespace fabric::python {

void bind_reads(pybind11::module_& m);

}  // namespace fabric::python
