#pragma once
// The page-aligned host buffer each role registers.

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <span>

#include "demo_error.hpp"

namespace demo {

class Region {
 public:
  explicit Region(std::size_t bytes)
      : bytes_(bytes), data_(static_cast<std::byte*>(std::aligned_alloc(kPage, bytes))) {
    if (!data_) throw DemoError("cannot allocate a " + std::to_string(bytes) + " byte buffer");
  }
  [[nodiscard]] std::byte* data() const { return data_.get(); }
  [[nodiscard]] std::size_t size() const { return bytes_; }
  [[nodiscard]] std::span<std::byte> bytes() const { return {data_.get(), bytes_}; }

 private:
  static constexpr std::size_t kPage = 4096;  // bytes_ must be a multiple of it
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::size_t bytes_;
  std::unique_ptr<std::byte, Free> data_;
};

}  // namespace demo
