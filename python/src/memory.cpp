#include "memory.hpp"

#include <string>

#include "errors.hpp"

namespace py = pybind11;

namespace fabric::python {
namespace {

constexpr const char* kAccepted =
    "reg_mr takes a writable C-contiguous buffer (numpy array, bytearray, ...), a torch "
    "tensor, or (ptr, length, device)";

Device parse_device(py::handle spec) {
  if (spec.is_none()) return Device::host();
  if (py::isinstance<py::int_>(spec) && !py::isinstance<py::bool_>(spec)) {
    const auto index = spec.cast<std::int64_t>();
    if (index < 0) raise_error(Errc::invalid_argument, "a CUDA device index must be >= 0");
    return Device::cuda(static_cast<int>(index));
  }
  // torch.device and plain strings both print as "cpu" / "cuda" / "cuda:N".
  const std::string text = py::str(spec).cast<std::string>();
  if (text == "cpu" || text == "host") return Device::host();
  if (text == "cuda") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    try {
      std::size_t used = 0;
      const int index = std::stoi(text.substr(5), &used);
      if (used == text.size() - 5 && index >= 0) return Device::cuda(index);
    } catch (const std::exception&) {  // fall through to the error below
    }
  }
  raise_error(
      Errc::invalid_argument,
      ("device must be \"cpu\", \"cuda\", \"cuda:N\" or an int, not \"" + text + "\"").c_str());
}

bool looks_like_tensor(py::handle obj) {
  return py::hasattr(obj, "data_ptr") && py::hasattr(obj, "is_contiguous") &&
         py::hasattr(obj, "element_size") && py::hasattr(obj, "numel");
}

MemoryTarget from_tensor(py::handle tensor) {
  if (!tensor.attr("is_contiguous")().cast<bool>()) {
    raise_error(Errc::invalid_argument, "the tensor is not contiguous; register .contiguous()");
  }
  MemoryTarget t;
  t.ptr = reinterpret_cast<void*>(tensor.attr("data_ptr")().cast<std::uintptr_t>());
  t.length = tensor.attr("numel")().cast<std::size_t>() *
             tensor.attr("element_size")().cast<std::size_t>();
  t.device = parse_device(tensor.attr("device"));
  t.origin = py::reinterpret_borrow<py::object>(tensor);
  t.keeper = t.origin;
  return t;
}

MemoryTarget from_buffer(py::handle obj) {
  // A memoryview holds the buffer export, which keeps the exporter alive and
  // stops bytearrays and numpy arrays from being resized under the registration.
  PyObject* raw = PyMemoryView_FromObject(obj.ptr());
  if (raw == nullptr) {
    PyErr_Clear();
    throw py::type_error(kAccepted);
  }
  auto view = py::reinterpret_steal<py::object>(raw);
  const Py_buffer* buffer = PyMemoryView_GET_BUFFER(raw);
  if (buffer->readonly != 0) {
    raise_error(Errc::invalid_argument,
                "the buffer is read-only; peers write into registered memory");
  }
  if (PyBuffer_IsContiguous(buffer, 'C') == 0) {
    raise_error(Errc::invalid_argument,
                "the buffer is not C-contiguous; register a contiguous copy");
  }
  return {buffer->buf, static_cast<std::size_t>(buffer->len), Device::host(),
          py::reinterpret_borrow<py::object>(obj), std::move(view)};
}

}  // namespace

MemoryTarget resolve_memory(py::handle obj, std::optional<std::int64_t> length, py::handle device,
                            py::object owner) {
  if (py::isinstance<py::int_>(obj) && !py::isinstance<py::bool_>(obj)) {
    if (!length) raise_error(Errc::invalid_argument, "reg_mr(ptr, length, device) needs a length");
    if (*length <= 0) raise_error(Errc::invalid_argument, "reg_mr needs a length > 0");
    MemoryTarget t;
    t.ptr = reinterpret_cast<void*>(obj.cast<std::uintptr_t>());
    t.length = static_cast<std::size_t>(*length);
    t.device = parse_device(device);
    t.origin = owner;
    t.keeper = std::move(owner);
    return t;
  }
  if (length || !device.is_none()) {
    raise_error(Errc::invalid_argument,
                "length and device are only for reg_mr(ptr, length, device); a buffer or "
                "tensor carries its own");
  }
  MemoryTarget t = looks_like_tensor(obj) ? from_tensor(obj) : from_buffer(obj);
  if (!owner.is_none()) t.keeper = py::make_tuple(t.keeper, owner);
  return t;
}

std::string device_text(const Device& device) {
  return device.is_host() ? "cpu" : "cuda:" + std::to_string(device.index);
}

void bind_memory(py::module_& m) {
  py::class_<PyMrHandle>(m, "MrHandle",
                         "The local side of a registration: the source of transfers. Keeps the "
                         "registered object alive.")
      .def_property_readonly(
          "valid", [](const PyMrHandle& h) { return h.handle.valid(); },
          "False after dereg_mr() or stop().")
      .def_property_readonly(
          "ptr",
          [](const PyMrHandle& h) { return reinterpret_cast<std::uintptr_t>(h.handle.data()); },
          "The registered address.")
      .def_property_readonly(
          "size", [](const PyMrHandle& h) { return h.handle.size(); }, "The registered length.")
      .def_property_readonly(
          "device", [](const PyMrHandle& h) { return device_text(h.handle.device()); },
          "\"cpu\" or \"cuda:N\".")
      .def_property_readonly(
          "obj", [](const PyMrHandle& h) { return h.obj; },
          "The registered object: the buffer or tensor, or reg_mr's owner for a raw pointer.")
      .def("__repr__", [](const PyMrHandle& h) {
        return "<fabric_lib.MrHandle size=" + std::to_string(h.handle.size()) +
               " device=" + device_text(h.handle.device()) +
               (h.handle.valid() ? "" : " deregistered") + ">";
      });
}

}  // namespace fabric::python
