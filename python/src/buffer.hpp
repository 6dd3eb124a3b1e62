#pragma once
// A read-only view of any bytes-like Python object (bytes, bytearray,
// memoryview, numpy array) for as long as this object lives. GIL required to
// create and destroy it.

#include <pybind11/pybind11.h>

#include <cstddef>
#include <span>

namespace fabric::python {

class BytesView {
 public:
  explicit BytesView(pybind11::handle obj, const char* what) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_C_CONTIGUOUS) != 0) {
      PyErr_Clear();
      throw pybind11::type_error(std::string(what) +
                                 " must be a C-contiguous bytes-like object (bytes, bytearray, "
                                 "memoryview, numpy array)");
    }
  }
  ~BytesView() { PyBuffer_Release(&view_); }
  BytesView(const BytesView&) = delete;
  BytesView& operator=(const BytesView&) = delete;

  [[nodiscard]] std::span<const std::byte> bytes() const noexcept {
    return {static_cast<const std::byte*>(view_.buf), static_cast<std::size_t>(view_.len)};
  }

 private:
  Py_buffer view_{};
};

}  // namespace fabric::python
