#include "pattern.hpp"

#include <cstring>

namespace bench {

void fill_pattern(std::byte* p, std::size_t len, std::uint64_t seed) {
  // splitmix64 per word: cheap, and no two seeds agree on any offset.
  std::uint64_t x = seed * 0x2545f4914f6cdd1dull + 1;
  for (std::size_t i = 0; i + 8 <= len; i += 8) {
    x += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(p + i, &z, 8);
  }
}

void Checksum::add(const std::byte* p, std::size_t len) {
  std::uint64_t h = h_;
  for (std::size_t i = 0; i + 8 <= len; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  h_ = h;
}

std::uint64_t checksum(const std::byte* p, std::size_t len) {
  Checksum c;
  c.add(p, len);
  return c.value();
}

}  // namespace bench
