#pragma once
// What Engine.reg_mr registers: a writable C-contiguous buffer (numpy array,
// bytearray, ...), a torch tensor, or a raw (ptr, length, device).

#include <pybind11/pybind11.h>

#include <cstddef>
#include <optional>
#include <string>

#include "fabric/device.hpp"
#include "fabric/memory.hpp"

namespace fabric::python {

struct MemoryTarget {
  void* ptr = nullptr;
  std::size_t length = 0;
  Device device;
  // What the caller passed (the owner for a raw pointer); MrHandle.obj.
  pybind11::object origin;
  // Keeps the memory alive (and, for buffers, pinned against resizing) while registered.
  pybind11::object keeper;
};

MemoryTarget resolve_memory(pybind11::handle obj, std::optional<std::int64_t> length,
                            pybind11::handle device, pybind11::object owner);

// "cpu", "cuda:N".
std::string device_text(const Device& device);

// The local side of a registration, plus the object whose memory it is.
struct PyMrHandle {
  MrHandle handle;
  pybind11::object obj;
  pybind11::object keeper;
};

void bind_memory(pybind11::module_& m);

}  // namespace fabric::python
