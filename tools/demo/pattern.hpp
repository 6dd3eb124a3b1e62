#pragma once
// Deterministic test data. Both processes regenerate the same bytes from a
// seed, so the target can check every byte without the data crossing twice.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace demo {

// Fills `out` with the pattern for source offsets [0, out.size()).
void fill_pattern(std::uint64_t seed, std::span<std::byte> out);

// A random permutation of [0, n), fixed by the seed.
std::vector<std::uint32_t> permutation(std::uint64_t seed, std::uint32_t n);

// The seeds a paged workload uses for its two index lists; distinct so the
// source and destination orders differ.
std::uint64_t src_order_seed(std::uint64_t seed);
std::uint64_t dst_order_seed(std::uint64_t seed);

struct Mismatch {
  std::uint64_t offset = 0;
  std::uint8_t expected = 0;
  std::uint8_t actual = 0;
};

// Checks a destination after a single write of `length` bytes at offset 0:
// the written bytes must match the pattern, the rest of `dst` must still be zero.
std::optional<Mismatch> check_single(std::uint64_t seed, std::uint64_t length,
                                     std::span<const std::byte> dst);

// Checks a destination after a paged write: page i of the batch went from
// source page src_order[i] to destination page dst_order[i], stride == page.
std::optional<Mismatch> check_paged(std::uint64_t seed, std::uint64_t page_length,
                                    std::span<const std::uint32_t> src_order,
                                    std::span<const std::uint32_t> dst_order,
                                    std::span<const std::byte> dst);

}  // namespace demo
