#pragma once
// Data checks: every run writes a pattern unique to (op, size, mode), and the
// target's checksum of the written range must equal the one computed here.

#include <cstddef>
#include <cstdint>
#include <span>

namespace bench {

void fill_pattern(std::byte* p, std::size_t len, std::uint64_t seed);

// A word-wise hash that can be fed in pieces (paged layouts). Lengths are
// multiples of 8, which every size the bench uses is.
class Checksum {
 public:
  void add(const std::byte* p, std::size_t len);
  std::uint64_t value() const noexcept { return h_; }

 private:
  std::uint64_t h_ = 0x9e3779b97f4a7c15ull;
};

std::uint64_t checksum(const std::byte* p, std::size_t len);

}  // namespace bench
