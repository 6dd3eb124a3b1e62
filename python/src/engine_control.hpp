#pragma once
// The Engine calls beyond single requests: batched registration, fencing a peer, a progress
// pass on the caller's thread, posting-path timings and what each group opened. Bound in
// engine_bind.cpp; each converts with the GIL held and calls the engine with it released.

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>

#include "engine.hpp"

namespace fabric::python {

pybind11::list reg_mrs(PyEngine& self, const pybind11::sequence& objs, bool remote_read,
                       std::optional<std::int64_t> group);
void fence_peer(PyEngine& self, const NetAddr& peer);
bool progress(PyEngine& self);
pybind11::list take_post_timings(PyEngine& self);
pybind11::list group_info(PyEngine& self);
pybind11::list domain_nics(PyEngine& self);

}  // namespace fabric::python
