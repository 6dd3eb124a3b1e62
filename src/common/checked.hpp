#pragma once
// Overflow-checked range arithmetic for request validation.

#include <cstdint>
#include <optional>

namespace fabric::checked {

inline std::optional<std::uint64_t> add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<std::uint64_t> mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// True when [offset, offset + length) lies inside [0, size).
inline bool range_fits(std::uint64_t offset, std::uint64_t length, std::uint64_t size) {
  const auto end = add(offset, length);
  return end && *end <= size;
}

}  // namespace fabric::checked
