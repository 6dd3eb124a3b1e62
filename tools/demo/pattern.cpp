#include "pattern.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace demo {
namespace {

// splitmix64: cheap, well mixed, and needs no state beyond its input, which
// lets any offset be regenerated independently.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr std::size_t kChunk = 1 << 20;

// `start` must be a multiple of 8 so every chunk lines up with pattern words.
void fill_from(std::uint64_t seed, std::uint64_t start, std::span<std::byte> out) {
  std::uint64_t word = start / 8;
  std::size_t pos = 0;
  for (; pos + 8 <= out.size(); pos += 8, ++word) {
    const std::uint64_t v = mix(seed ^ mix(word));
    std::memcpy(out.data() + pos, &v, 8);
  }
  if (pos < out.size()) {
    const std::uint64_t v = mix(seed ^ mix(word));
    std::memcpy(out.data() + pos, &v, out.size() - pos);
  }
}

std::optional<Mismatch> first_difference(std::span<const std::byte> expected,
                                         std::span<const std::byte> actual,
                                         std::uint64_t base_offset) {
  if (std::memcmp(expected.data(), actual.data(), expected.size()) == 0) return std::nullopt;
  const auto [e, a] = std::mismatch(expected.begin(), expected.end(), actual.begin());
  const auto at = static_cast<std::uint64_t>(e - expected.begin());
  return Mismatch{base_offset + at, static_cast<std::uint8_t>(*e), static_cast<std::uint8_t>(*a)};
}

// Bytes outside the written region must be untouched (the target zeroes them).
std::optional<Mismatch> check_zero(std::span<const std::byte> dst, std::uint64_t from) {
  static const std::vector<std::byte> zeros(kChunk);
  for (std::uint64_t off = from; off < dst.size(); off += kChunk) {
    const std::size_t n = std::min<std::uint64_t>(kChunk, dst.size() - off);
    if (auto m = first_difference({zeros.data(), n}, dst.subspan(off, n), off)) return m;
  }
  return std::nullopt;
}

}  // namespace

void fill_pattern(std::uint64_t seed, std::span<std::byte> out) { fill_from(seed, 0, out); }

std::vector<std::uint32_t> permutation(std::uint64_t seed, std::uint32_t n) {
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0U);
  // Fisher-Yates with our own generator: std::shuffle's output is not fixed
  // by the standard, and the two processes must agree.
  std::uint64_t state = seed;
  for (std::uint32_t i = n; i > 1; --i) {
    state = mix(state);
    const auto j = static_cast<std::uint32_t>(state % i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

std::uint64_t src_order_seed(std::uint64_t seed) { return mix(seed ^ 0x5352434fULL); }
std::uint64_t dst_order_seed(std::uint64_t seed) { return mix(seed ^ 0x4453544fULL); }

std::optional<Mismatch> check_single(std::uint64_t seed, std::uint64_t length,
                                     std::span<const std::byte> dst) {
  if (length > dst.size()) return Mismatch{dst.size(), 0, 0};
  std::vector<std::byte> expected(kChunk);
  for (std::uint64_t off = 0; off < length; off += kChunk) {
    const std::size_t n = std::min<std::uint64_t>(kChunk, length - off);
    fill_from(seed, off, {expected.data(), n});
    if (auto m = first_difference({expected.data(), n}, dst.subspan(off, n), off)) return m;
  }
  return check_zero(dst, length);
}

std::optional<Mismatch> check_paged(std::uint64_t seed, std::uint64_t page_length,
                                    std::span<const std::uint32_t> src_order,
                                    std::span<const std::uint32_t> dst_order,
                                    std::span<const std::byte> dst) {
  const std::uint64_t pages = dst_order.size();
  const std::uint64_t written = pages * page_length;
  if (src_order.size() != pages || written > dst.size()) return Mismatch{dst.size(), 0, 0};

  std::vector<std::byte> source(src_order.size() * page_length);
  fill_pattern(seed, source);

  // Walk destination pages in address order so the reported mismatch is the
  // lowest bad offset, whatever order the pages were written in.
  std::vector<std::uint32_t> batch_slot_of(pages);
  for (std::uint32_t i = 0; i < pages; ++i) batch_slot_of[dst_order[i]] = i;
  for (std::uint64_t d = 0; d < pages; ++d) {
    const std::uint64_t s = src_order[batch_slot_of[d]];
    const std::span<const std::byte> want{source.data() + s * page_length, page_length};
    if (auto m = first_difference(want, dst.subspan(d * page_length, page_length),
                                  d * page_length)) {
      return m;
    }
  }
  return check_zero(dst, written);
}

}  // namespace demo
