#include "errors.hpp"

#include <array>
#include <string>

namespace py = pybind11;

namespace fabric::python {
namespace {

constexpr std::size_t kCodes = static_cast<std::size_t>(Errc::cancelled) + 1;

// Owned by the module (attributes keep them alive); indexed by Errc.
std::array<PyObject*, kCodes> g_types{};

struct ErrorSpec {
  Errc code;
  const char* name;
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
      {Errc::invalid_argument, "InvalidArgumentError", PyExc_ValueError,
       "The request can never succeed as written."},
      {Errc::out_of_range, "OutOfRangeError", PyExc_ValueError,
       "An offset, length or page index lies outside a registration."},
      {Errc::malformed, "MalformedError", PyExc_ValueError,
       "A wire-format decode failed; the message names the field."},
      {Errc::again, "AgainError", nullptr, "Back-pressure: nothing was submitted, retry later."},
      {Errc::timeout, "FabricTimeoutError", PyExc_TimeoutError,
       "A bounded wait ran out, or a request saw no completion within request_timeout_ms."},
      {Errc::provider, "ProviderError", nullptr,
       "The fabric provider reported an error (dead peer, revoked key, transport error)."},
      {Errc::unsupported, "UnsupportedError", nullptr,
       "The provider or build lacks a needed capability."},
      {Errc::not_found, "NotFoundError", PyExc_LookupError,
       "Unknown handle, peer group, counter, provider or device."},
      {Errc::shutdown, "ShutdownError", nullptr, "The engine is stopping or stopped."},
      {Errc::cancelled, "CancelledError", nullptr, "Outstanding work abandoned by stop()."},
  };
  for (const ErrorSpec& s : specs) {
    py::tuple bases = s.extra_base != nullptr ? py::make_tuple(base, py::handle(s.extra_base))
                                              : py::make_tuple(base);
    const std::string qualified = std::string("fabric_lib.") + s.name;
    py::object type = py::reinterpret_steal<py::object>(
        PyErr_NewExceptionWithDoc(qualified.c_str(), s.doc, bases.ptr(), nullptr));
    if (!type) throw py::error_already_set();
    type.attr("errc") = py::str(std::string(errc_name(s.code)));
    m.attr(s.name) = type;
    g_types[static_cast<std::size_t>(s.code)] = type.ptr();
  }
  g_types[static_cast<std::size_t>(Errc::ok)] = base.ptr();
}

py::object exception_for(const Status& status) {
  if (status.ok()) return py::none();
  PyObject* type = g_types[static_cast<std::size_t>(status.code())];
  return py::reinterpret_borrow<py::object>(type)(py::str(status.message()));
}

void raise_status(const Status& status) { raise_error(status.code(), status.message().c_str()); }

void raise_error(Errc code, const char* message) {
  PyObject* type = g_types[static_cast<std::size_t>(code)];
  PyErr_SetString(type, message);
  throw py::error_already_set();
}

}  // namespace fabric::python
