#include "errors.hpp"

#include <array>
#include <string>

namespace py = pybind11;

namespace fabric::python {
namespace {

constexpr std::size_t kCodes = static_cast<std::size_t>(Errc::cancelled) + 1;

// Owned by the module (attributes keep them alive); indexed by Errc.
std::array<PyObject*, kCodes> g_types{};

// fabric_lib's class names, indexed by Errc (ok: the base).
constexpr std::array<const char*, kCodes> kNames = {
    "FabricError",      "InvalidArgumentError", "OutOfRangeError", "MalformedError",
    "AgainError",       "FabricTimeoutError",   "ProviderError",   "UnsupportedError",
    "NotFoundError",    "ShutdownError",        "CancelledError"};

struct ErrorSpec {
  Errc code;
  PyObject* extra_base;  // a built-in the class also derives from, so generic handlers work
  const char* doc;
};

}  // namespace

void register_errors(py::module_& m) {
  py::object base = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
      "fabric_lib.FabricError",
      "Base of every fabric_lib error. `errc` names the engine's error code; str() is its "
      "message.",
      PyExc_Exception, nullptr));
  if (!base) throw py::error_already_set();
  base.attr("errc") = py::none();
  m.attr("FabricError") = base;

  const ErrorSpec specs[] = {
      {Errc::invalid_argument, PyExc_ValueError,
       "The request can never succeed as written."},
      {Errc::out_of_range, PyExc_ValueError,
       "An offset, length or page index lies outside a registration."},
      {Errc::malformed, PyExc_ValueError,
       "A wire-format decode failed; the message names the field."},
      {Errc::again, nullptr, "Back-pressure: nothing was submitted, retry later."},
      {Errc::timeout, PyExc_TimeoutError,
       "A bounded wait ran out, or a request saw no completion within request_timeout_ms."},
      {Errc::provider, nullptr,
       "The fabric provider reported an error (dead peer, revoked key, transport error)."},
      {Errc::unsupported, nullptr,
       "The provider or build lacks a needed capability."},
      {Errc::not_found, PyExc_LookupError,
       "Unknown handle, peer group, counter, provider or device."},
      {Errc::shutdown, nullptr, "The engine is stopping or stopped."},
      {Errc::cancelled, nullptr, "Outstanding work abandoned by stop()."},
  };
  for (const ErrorSpec& s : specs) {
    py::tuple bases = s.extra_base != nullptr ? py::make_tuple(base, py::handle(s.extra_base))
                                              : py::make_tuple(base);
    const char* name = kNames[static_cast<std::size_t>(s.code)];
    const std::string qualified = std::string("fabric_lib.") + name;
    py::object type = py::reinterpret_steal<py::object>(
        PyErr_NewExceptionWithDoc(qualified.c_str(), s.doc, bases.ptr(), nullptr));
    if (!type) throw py::error_already_set();
    type.attr("errc") = py::str(std::string(errc_name(s.code)));
    m.attr(name) = type;
    g_types[static_cast<std::size_t>(s.code)] = type.ptr();
  }
  g_types[static_cast<std::size_t>(Errc::ok)] = base.ptr();
}

namespace {
// The class for `code`: the ones register_errors made, or, before it ran (never, once the
// package is imported), fabric_lib's, looked up once by name.
PyObject* type_for(Errc code) {
  const auto index = static_cast<std::size_t>(code);
  if (index >= kCodes) return g_types[0] != nullptr ? g_types[0] : PyExc_RuntimeError;
  if (g_types[index] == nullptr) {
    const char* name = code == Errc::ok ? "FabricError" : kNames[index];
    py::object type = py::module_::import("fabric_lib").attr(name);
    g_types[index] = type.release().ptr();  // kept for the process's lifetime
  }
  return g_types[index];
}
}  // namespace

py::object exception_for(const Status& status) {
  if (status.ok()) return py::none();
  PyObject* type = type_for(status.code());
  return py::reinterpret_borrow<py::object>(type)(py::str(status.message()));
}

void raise_status(const Status& status) { raise_error(status.code(), status.message().c_str()); }

void raise_error(Errc code, const char* message) {
  PyObject* type = type_for(code);
  PyErr_SetString(type, message);
  throw py::error_already_set();
}

}  // namespace fabric::python
