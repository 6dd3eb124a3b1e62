#pragma once
// Little-endian byte encoding for the versioned wire formats.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace fabric::wire {

class Writer {
 public:
  void u8(std::uint8_t v) { out_.push_back(static_cast<std::byte>(v)); }
  void u16(std::uint16_t v) { put_le(v, 2); }
  void u32(std::uint32_t v) { put_le(v, 4); }
  void u64(std::uint64_t v) { put_le(v, 8); }
  void bytes(std::span<const std::byte> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void text(const std::string& s) {
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    out_.insert(out_.end(), p, p + s.size());
  }
  // Appends the CRC-32 of everything written so far; the last field of a
  // checksummed format (see unseal()).
  void seal();
  [[nodiscard]] std::vector<std::byte> take() && { return std::move(out_); }

 private:
  void put_le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
  }
  std::vector<std::byte> out_;
};

// Every read returns nullopt once the input is exhausted; callers turn that
// into Errc::malformed naming the field.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}

  std::optional<std::uint8_t> u8() { return get_le<std::uint8_t>(1); }
  std::optional<std::uint16_t> u16() { return get_le<std::uint16_t>(2); }
  std::optional<std::uint32_t> u32() { return get_le<std::uint32_t>(4); }
  std::optional<std::uint64_t> u64() { return get_le<std::uint64_t>(8); }
  std::optional<std::span<const std::byte>> bytes(std::size_t n) {
    if (remaining() < n) return std::nullopt;
    auto s = in_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  [[nodiscard]] std::size_t remaining() const noexcept { return in_.size() - pos_; }

 private:
  template <typename T>
  std::optional<T> get_le(std::size_t n) {
    if (remaining() < n) return std::nullopt;
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) {
      v |= static_cast<std::uint64_t>(in_[pos_ + i]) << (8 * i);
    }
    pos_ += n;
    return static_cast<T>(v);
  }
  std::span<const std::byte> in_;
  std::size_t pos_ = 0;
};

// CRC-32 (zlib's polynomial) of `bytes`.
std::uint32_t crc32(std::span<const std::byte> bytes);

// What precedes a trailing CRC-32 that matches it; nullopt when the input is
// shorter than 4 bytes or the checksum does not match (a flipped bit, a cut
// or an appended byte). Decoders parse the returned body only.
std::optional<std::span<const std::byte>> unseal(std::span<const std::byte> bytes);

std::string to_hex(std::span<const std::byte> bytes);
std::optional<std::vector<std::byte>> from_hex(std::string_view text);

}  // namespace fabric::wire
