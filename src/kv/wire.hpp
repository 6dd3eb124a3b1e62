#pragma once
// Little-endian byte writer and bounds-checked reader for the KV messages.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fabric::kv::wire {

class Writer {
 public:
  template <typename T>
  void put(T v) {
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      bytes_.push_back(static_cast<std::byte>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff));
    }
  }
  void put_bytes(std::span<const std::byte> b) {
    put<std::uint32_t>(static_cast<std::uint32_t>(b.size()));
    bytes_.insert(bytes_.end(), b.begin(), b.end());
  }
  void put_string(std::string_view s) { put_bytes(std::as_bytes(std::span(s.data(), s.size()))); }
  [[nodiscard]] std::vector<std::byte>& bytes() noexcept { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

// Every read past the end sets failed() and yields zeros, so decoders check once at the end.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  template <typename T>
  T get() {
    if (bytes_.size() - pos_ < sizeof(T)) {
      failed_ = true;
      pos_ = bytes_.size();
      return T{};
    }
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      v |= std::uint64_t{static_cast<std::uint8_t>(bytes_[pos_ + i])} << (8 * i);
    }
    pos_ += sizeof(T);
    return static_cast<T>(v);
  }
  std::span<const std::byte> get_bytes(std::size_t max) {
    const auto n = get<std::uint32_t>();
    if (n > max || bytes_.size() - pos_ < n) {
      failed_ = true;
      pos_ = bytes_.size();
      return {};
    }
    auto out = bytes_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  std::string get_string(std::size_t max) {
    auto b = get_bytes(max);
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
  [[nodiscard]] std::size_t remaining() const noexcept { return bytes_.size() - pos_; }
  [[nodiscard]] bool failed() const noexcept { return failed_; }

 private:
  std::span<const std::byte> bytes_;
  std::size_t pos_ = 0;
  bool failed_ = false;
};

}  // namespace fabric::kv::wire
