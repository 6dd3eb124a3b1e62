// Engine.reserve_imms and the ImmReservation it returns (fabric/imm_reservation.hpp): a block of
// immediate values no other workload on the engine gets.

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>

#include "engine.hpp"
#include "errors.hpp"
#include "fabric/imm_reservation.hpp"
#include "requests.hpp"

namespace py = pybind11;

namespace fabric::python {

namespace {

std::unique_ptr<ImmReservation> reserve_imms(PyEngine& self, std::int64_t count,
                                             const std::string& owner) {
  const std::uint32_t n = to_u32(count, "count");
  return std::make_unique<ImmReservation>(take(self.call_released(
      [&](TransferEngine& e) { return e.reserve_imms(n, owner); })));
}

}  // namespace

void bind_imm_reservation(py::module_& m) {
  py::class_<ImmReservation>(m, "ImmReservation",
                             "A block of immediate values [first, first + count) that no other "
                             "reservation on the engine overlaps (Engine.reserve_imms). Released "
                             "by release(), on leaving a with block, or when collected.")
      .def_property_readonly("first", &ImmReservation::first, "The block's first value.")
      .def_property_readonly("count", &ImmReservation::count,
                             "How many values it holds; 0 once released.")
      .def_property_readonly("owner", &ImmReservation::owner, "Who reserved it.")
      .def("__contains__", &ImmReservation::contains, py::arg("imm"))
      .def(
          "at", [](const ImmReservation& r, std::int64_t i) { return take(r.at(to_u32(i, "i"))); },
          py::arg("i"), "The block's i-th value; OutOfRangeError past count.")
      .def(
          "check", [](const ImmReservation& r, std::int64_t imm) { check(r.check(to_u32(imm, "imm"))); },
          py::arg("imm"),
          "Raises InvalidArgumentError, naming the owner and the block, for a value outside it.")
      .def("release", &ImmReservation::release, "Gives the block back now; idempotent.")
      .def("__enter__", [](py::object self) { return self; })
      .def(
          "__exit__",
          [](ImmReservation& r, const py::args&) {
            r.release();
            return false;
          })
      .def("__repr__", [](const ImmReservation& r) {
        return "<fabric_lib.ImmReservation " + r.owner() + " [" + std::to_string(r.first()) +
               ", +" + std::to_string(r.count()) + ")>";
      });
  auto engine = py::reinterpret_borrow<py::class_<PyEngine>>(m.attr("Engine"));
  engine.def("reserve_imms", &reserve_imms, py::arg("count"), py::arg("owner"),
             "Reserves a block of `count` immediate values for `owner` (one block per owner "
             "name), at or above 2**20; the values below stay free for programs that pick their "
             "own. Workloads sharing the engine count only their own block's values.");
}

}  // namespace fabric::python
