// The immediate counts (fabric/imm_counts.hpp) as Python functions: the engine's own rule, so a
// receiver in Python waits for exactly what the engine sends.

#include <pybind11/pybind11.h>

#include <optional>

#include "arg_types.hpp"
#include "errors.hpp"
#include "fabric/imm_counts.hpp"
#include "requests.hpp"

namespace py = pybind11;

namespace fabric::python {

void bind_counts(py::module_& m) {
  m.def(
      "single_write_imm_count",
      [](std::int64_t length, std::int64_t num_domains, std::int64_t num_shards,
         std::optional<std::int64_t> domain) {
        return take(single_write_imm_count(to_offset(length, "length"),
                                           to_u32(num_domains, "num_domains"),
                                           to_write_routing(num_shards, domain)));
      },
      py::arg("length"), py::arg("num_domains"), py::kw_only(), py::arg("num_shards") = 0,
      py::arg("domain") = py::none(),
      "Immediates one Engine.single_write with an imm delivers, routed as given.");
  m.def(
      "paged_writes_imm_count",
      [](std::int64_t num_pages) {
        return paged_writes_imm_count(to_offset(num_pages, "num_pages"));
      },
      py::arg("num_pages"),
      "Immediates one Engine.paged_writes with an imm delivers: one per page.");
  m.def(
      "scatter_imm_count",
      [](std::int64_t length, std::int64_t num_domains, RoutingArg routing) {
        return take(scatter_imm_count(to_offset(length, "length"),
                                      to_u32(num_domains, "num_domains"),
                                      to_scatter_routing(routing)));
      },
      py::arg("length"), py::arg("num_domains"), py::arg("routing") = "peers",
      "Immediates each receiving peer sees for its slice of `length` bytes of a scatter.");
}

}  // namespace fabric::python
