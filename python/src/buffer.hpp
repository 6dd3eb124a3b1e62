#pragma once
// A read-only view of any bytes-like Python object (bytes, bytearray,
// memoryview, numpy array) for as long as this object lives. GIL required to
// create and destroy it.

#include <pybind11/pybind11.h>

#include <cstddef>
#include <span>
#include <string>

namespace fabric::python {

// `writable`: the object must let us write (numpy arrays, bytearray; not bytes).
class BytesView {
 public:
  explicit BytesView(pybind11::handle obj, const char* what, bool writable = false) {
    const int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj.ptr(), &view_, flags) != 0) {
      PyErr_Clear();
      throw pybind11::type_error(std::string(what) + " must be a C-contiguous" +
                                 (writable ? " writable" : "") +
                                 " bytes-like object (bytes, bytearray, memoryview, numpy array)");
    }
  }
  ~BytesView() { PyBuffer_Release(&view_); }
  BytesView(const BytesView&) = delete;
  BytesView& operator=(const BytesView&) = delete;

  [[nodiscard]] std::span<const std::byte> bytes() const noexcept {
    return {static_cast<const std::byte*>(view_.buf), static_cast<std::size_t>(view_.len)};
  }
  // Writable only when constructed so.
  [[nodiscard]] std::span<std::byte> mutable_bytes() const noexcept {
    return {static_cast<std::byte*>(view_.buf), static_cast<std::size_t>(view_.len)};
  }
  // The bytes as elements of T (a trailing partial element is not included).
  template <typename T>
  [[nodiscard]] std::span<T> as() const noexcept {
    return {static_cast<T*>(view_.buf), static_cast<std::size_t>(view_.len) / sizeof(T)};
  }

 private:
  Py_buffer view_{};
};

}  // namespace fabric::python
