#pragma once
// Python names for arguments that the binding takes as plain objects and
// inspects itself (buffer protocol, tensors, int sequences, slice tuples).
// pybind11 2.10 would print each as `handle` in the signature line of
// __doc__; these are py::objects that accept any value (the conversion code
// raises its own clear TypeError) and name themselves as _native.pyi does.

#include <pybind11/pybind11.h>

namespace fabric::python {

#define FABRIC_PY_ARG_TYPE(Name)                                           \
  struct Name : pybind11::object {                                         \
    static bool accepts(PyObject*) { return true; }                        \
    PYBIND11_OBJECT_DEFAULT(Name, pybind11::object, accepts)               \
  }

FABRIC_PY_ARG_TYPE(BufferArg);        // bytes-like: the buffer protocol
FABRIC_PY_ARG_TYPE(MemoryArg);        // reg_mr's obj
FABRIC_PY_ARG_TYPE(DeviceArg);        // reg_mr's device
FABRIC_PY_ARG_TYPE(IndicesArg);       // page indices
FABRIC_PY_ARG_TYPE(SlicesArg);        // scatter slices
FABRIC_PY_ARG_TYPE(RoutingArg);       // scatter routing

#undef FABRIC_PY_ARG_TYPE

}  // namespace fabric::python

namespace pybind11::detail {

#define FABRIC_PY_ARG_NAME(Name, text)                  \
  template <>                                           \
  struct handle_type_name<fabric::python::Name> {       \
    static constexpr auto name = const_name(text);      \
  }

FABRIC_PY_ARG_NAME(BufferArg, "Buffer");
FABRIC_PY_ARG_NAME(MemoryArg, "Buffer | torch.Tensor | int");
FABRIC_PY_ARG_NAME(DeviceArg, "str | int | torch.device | None");
FABRIC_PY_ARG_NAME(IndicesArg, "Sequence[int] | Buffer");
FABRIC_PY_ARG_NAME(SlicesArg,
                   "Iterable[ScatterSlice | tuple[MrDesc, int] | tuple[MrDesc, int, int] | "
                   "tuple[MrDesc, int, int, int]]");
FABRIC_PY_ARG_NAME(RoutingArg, "str | int");

#undef FABRIC_PY_ARG_NAME

}  // namespace pybind11::detail
