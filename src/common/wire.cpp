#include "common/wire.hpp"

#include <zlib.h>

#include <algorithm>

namespace fabric::wire {

std::uint32_t crc32(std::span<const std::byte> bytes) {
  // zlib takes uInt lengths; descriptors are far below 4 GiB, but stay exact.
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
  std::size_t left = bytes.size();
  while (left > 0) {
    const auto n = static_cast<uInt>(std::min<std::size_t>(left, 1u << 30));
    crc = ::crc32(crc, p, n);
    p += n;
    left -= n;
  }
  return static_cast<std::uint32_t>(crc);
}

void Writer::seal() { u32(crc32(out_)); }

std::optional<std::span<const std::byte>> unseal(std::span<const std::byte> bytes) {
  if (bytes.size() < 4) return std::nullopt;
  const auto body = bytes.first(bytes.size() - 4);
  Reader tail(bytes.last(4));
  if (tail.u32() != crc32(body)) return std::nullopt;
  return body;
}

std::string to_hex(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (std::byte b : bytes) {
    const auto v = static_cast<unsigned>(b);
    out.push_back(kDigits[v >> 4]);
    out.push_back(kDigits[v & 0xf]);
  }
  return out;
}

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::optional<std::vector<std::byte>> from_hex(std::string_view text) {
  if (text.size() % 2 != 0) return std::nullopt;
  std::vector<std::byte> out;
  out.reserve(text.size() / 2);
  for (std::size_t i = 0; i < text.size(); i += 2) {
    const int hi = hex_value(text[i]);
    const int lo = hex_value(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<std::byte>((hi << 4) | lo));
  }
  return out;
}

}  // namespace fabric::wire
