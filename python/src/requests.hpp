#pragma once
// Python arguments → request values, with errors a Python caller can act on.

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "fabric/requests.hpp"

namespace fabric::python {

// Offsets, lengths and counts arrive as Python ints; a negative one is the
// caller's range error (OutOfRangeError), not a type error.
std::uint64_t to_offset(std::int64_t value, const char* name);
std::uint32_t to_u32(std::int64_t value, const char* name);
std::optional<std::uint32_t> to_imm(std::optional<std::int64_t> imm);

// A sequence of non-negative ints, or a 1-D buffer of uint32 (copied in one go).
std::vector<std::uint32_t> to_indices(pybind11::handle obj, const char* name);

WriteRouting to_write_routing(std::int64_t shards, std::optional<std::int64_t> domain);
// "peers", "bytes", or an int: the Domain every slice is pinned to.
ScatterRouting to_scatter_routing(pybind11::handle spec);
// ScatterSlice objects or (dst, length[, src_offset[, dst_offset]]) tuples.
std::vector<ScatterSlice> to_slices(pybind11::handle seq);

void bind_requests(pybind11::module_& m);

}  // namespace fabric::python
