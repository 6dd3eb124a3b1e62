#include "requests.hpp"

#include <cstring>
#include <string>

#include "errors.hpp"

namespace py = pybind11;

namespace fabric::python {
namespace {

[[noreturn]] void raise_text(Errc code, const std::string& text) {
  raise_error(code, text.c_str());
}

bool is_uint32_format(const char* format) {
  if (format == nullptr) return false;
  // Native or little-endian unsigned 4-byte ints, as numpy's uint32 exports them.
  if (*format == '@' || *format == '=' || *format == '<') ++format;
  return (std::strcmp(format, "I") == 0 || std::strcmp(format, "L") == 0);
}

bool copy_uint32_buffer(py::handle obj, std::vector<std::uint32_t>& out) {
  if (!PyObject_CheckBuffer(obj.ptr())) return false;
  Py_buffer view{};
  if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
    PyErr_Clear();
    return false;
  }
  const bool fits = view.ndim == 1 && view.itemsize == 4 && is_uint32_format(view.format);
  if (fits) {
    out.resize(static_cast<std::size_t>(view.len) / 4);
    if (!out.empty()) std::memcpy(out.data(), view.buf, static_cast<std::size_t>(view.len));
  }
  PyBuffer_Release(&view);
  return fits;
}

}  // namespace

std::uint64_t to_offset(std::int64_t value, const char* name) {
  if (value < 0)
    raise_text(Errc::out_of_range,
               std::string(name) + " " + std::to_string(value) + " is negative");
  return static_cast<std::uint64_t>(value);
}

std::uint32_t to_u32(std::int64_t value, const char* name) {
  if (value < 0 || value > 0xFFFFFFFFLL) {
    raise_text(Errc::invalid_argument,
               std::string(name) + " " + std::to_string(value) + " is not in [0, 2**32)");
  }
  return static_cast<std::uint32_t>(value);
}

std::optional<std::uint32_t> to_imm(std::optional<std::int64_t> imm) {
  if (!imm) return std::nullopt;
  return to_u32(*imm, "imm");
}

std::vector<std::uint32_t> to_indices(py::handle obj, const char* name) {
  std::vector<std::uint32_t> out;
  if (copy_uint32_buffer(obj, out)) return out;
  if (!py::isinstance<py::iterable>(obj) || py::isinstance<py::str>(obj)) {
    throw py::type_error(std::string(name) + " must be a sequence of ints or a uint32 array");
  }
  const py::ssize_t hint = PyObject_LengthHint(obj.ptr(), 0);
  if (hint > 0) out.reserve(static_cast<std::size_t>(hint));
  std::size_t i = 0;
  for (py::handle item : obj) {
    py::int_ value = py::reinterpret_steal<py::int_>(PyNumber_Index(item.ptr()));
    if (!value) throw py::error_already_set();
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (overflow != 0 || v < 0 || v > 0xFFFFFFFFLL) {
      raise_text(Errc::out_of_range, std::string(name) + "[" + std::to_string(i) +
                                         "] = " + py::str(value).cast<std::string>() +
                                         " is not a page index in [0, 2**32)");
    }
    out.push_back(static_cast<std::uint32_t>(v));
    ++i;
  }
  return out;
}

WriteRouting to_write_routing(std::int64_t shards, std::optional<std::int64_t> domain) {
  if (domain) {
    if (shards != 0) raise_error(Errc::invalid_argument, "give num_shards or domain, not both");
    return WriteRouting::pinned(to_u32(*domain, "domain"));
  }
  return WriteRouting::shards(to_u32(shards, "num_shards"));
}

ScatterRouting to_scatter_routing(py::handle spec) {
  if (py::isinstance<py::str>(spec)) {
    const auto text = spec.cast<std::string>();
    if (text == "peers") return ScatterRouting::peers();
    if (text == "bytes") return ScatterRouting::bytes();
    raise_text(Errc::invalid_argument,
               "routing must be \"peers\", \"bytes\" or a Domain index, not \"" + text + "\"");
  }
  if (py::isinstance<py::int_>(spec) && !py::isinstance<py::bool_>(spec)) {
    return ScatterRouting::pinned(to_u32(spec.cast<std::int64_t>(), "routing domain"));
  }
  throw py::type_error("routing must be \"peers\", \"bytes\" or a Domain index");
}

std::vector<ScatterSlice> to_slices(py::handle seq) {
  std::vector<ScatterSlice> slices;
  std::size_t i = 0;
  for (py::handle item : seq) {
    if (py::isinstance<ScatterSlice>(item)) {
      slices.push_back(item.cast<ScatterSlice>());
    } else if (py::isinstance<py::tuple>(item)) {
      auto t = item.cast<py::tuple>();
      if (t.size() < 2 || t.size() > 4) {
        throw py::type_error("slice " + std::to_string(i) +
                             ": expected (dst, length[, src_offset[, dst_offset]])");
      }
      ScatterSlice s;
      s.dst = t[0].cast<MrDesc>();
      s.length = to_offset(t[1].cast<std::int64_t>(), "length");
      if (t.size() > 2) s.src_offset = to_offset(t[2].cast<std::int64_t>(), "src_offset");
      if (t.size() > 3) s.dst_offset = to_offset(t[3].cast<std::int64_t>(), "dst_offset");
      slices.push_back(std::move(s));
    } else {
      throw py::type_error("slice " + std::to_string(i) + ": expected a ScatterSlice or a tuple");
    }
    ++i;
  }
  return slices;
}

void bind_requests(py::module_& m) {
  py::class_<ScatterSlice>(m, "ScatterSlice",
                           "One peer's part of a scatter: src[src_offset:src_offset+length] -> "
                           "dst[dst_offset:dst_offset+length].")
      .def(py::init([](MrDesc dst, std::int64_t length, std::int64_t src_offset,
                       std::int64_t dst_offset) {
             return ScatterSlice{std::move(dst), to_offset(length, "length"),
                                 to_offset(src_offset, "src_offset"),
                                 to_offset(dst_offset, "dst_offset")};
           }),
           py::arg("dst"), py::arg("length"), py::arg("src_offset") = 0, py::arg("dst_offset") = 0)
      .def_readonly("dst", &ScatterSlice::dst, "The peer's MrDesc.")
      .def_readonly("length", &ScatterSlice::length, "Bytes to write.")
      .def_readonly("src_offset", &ScatterSlice::src_offset, "Offset in the source registration.")
      .def_readonly("dst_offset", &ScatterSlice::dst_offset, "Offset in the destination.")
      .def("__repr__", [](const ScatterSlice& s) {
        return "<fabric_lib.ScatterSlice length=" + std::to_string(s.length) +
               " src_offset=" + std::to_string(s.src_offset) +
               " dst_offset=" + std::to_string(s.dst_offset) + ">";
      });

  py::class_<PeerGroupHandle>(m, "PeerGroup",
                              "Peers resolved once by Engine.add_peer_group; valid until stop().")
      .def_readonly("id", &PeerGroupHandle::id, "The engine's id for the group.")
      .def_readonly("size", &PeerGroupHandle::size, "Number of peers.")
      .def(
          "__eq__", [](const PeerGroupHandle& a, const PeerGroupHandle& b) { return a == b; },
          py::is_operator())
      .def("__hash__", [](const PeerGroupHandle& g) { return std::hash<std::uint64_t>{}(g.id); })
      .def("__repr__", [](const PeerGroupHandle& g) {
        return "<fabric_lib.PeerGroup id=" + std::to_string(g.id) +
               " size=" + std::to_string(g.size) + ">";
      });
}

}  // namespace fabric::python
