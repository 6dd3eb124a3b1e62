#pragma once
// Deterministic test data and byte-exact verification. Both processes of a
// test regenerate the same bytes from a seed, so nothing large crosses the
// control channel.

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace fabric::test {

// splitmix64: tiny, fast, and identical on every platform.
std::uint64_t splitmix64(std::uint64_t& state) noexcept;

// Fills `out` with the byte stream of `seed` (position 0 of the span is
// position 0 of the stream).
void fill_random(std::span<std::byte> out, std::uint64_t seed) noexcept;
[[nodiscard]] std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed);

// Seed of the sentinel pattern written around destinations; distinct from
// any data seed the tests use so overwritten guard bytes show up.
inline constexpr std::uint64_t kSentinelSeed = 0x5e47'1e15'eed0'0000ull;

struct ByteRange {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

// Success, or the first mismatching offset with both bytes, the number of
// mismatches, and a hex window around the first one.
::testing::AssertionResult bytes_equal(std::span<const std::byte> actual,
                                       std::span<const std::byte> expected);

// Checks every byte of `buffer` outside `written` still holds the sentinel
// stream of `sentinel_seed` (as fill_random left it).
::testing::AssertionResult untouched_outside(std::span<const std::byte> buffer,
                                             std::span<const ByteRange> written,
                                             std::uint64_t sentinel_seed = kSentinelSeed);

// For destinations written without an immediate, whose arrival the receiver
// cannot observe: polls until `actual` equals `expected` or the timeout, then
// returns bytes_equal() of the final state.
::testing::AssertionResult eventually_equal(std::span<const std::byte> actual,
                                            std::span<const std::byte> expected,
                                            std::chrono::milliseconds timeout);

}  // namespace fabric::test

#define EXPECT_BYTES_EQUAL(actual, expected) \
  EXPECT_TRUE(::fabric::test::bytes_equal((actual), (expected)))
#define ASSERT_BYTES_EQUAL(actual, expected) \
  ASSERT_TRUE(::fabric::test::bytes_equal((actual), (expected)))
