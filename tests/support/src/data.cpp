#include "fabric_test/data.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <thread>

namespace fabric::test {

std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void fill_random(std::span<std::byte> out, std::uint64_t seed) noexcept {
  std::uint64_t state = seed;
  std::size_t i = 0;
  for (; i + 8 <= out.size(); i += 8) {
    const std::uint64_t v = splitmix64(state);
    std::memcpy(out.data() + i, &v, 8);
  }
  if (i < out.size()) {
    const std::uint64_t v = splitmix64(state);
    std::memcpy(out.data() + i, &v, out.size() - i);
  }
}

std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed) {
  std::vector<std::byte> out(n);
  fill_random(out, seed);
  return out;
}

namespace {
std::string hex_window(std::span<const std::byte> bytes, std::size_t center) {
  const std::size_t begin = center >= 8 ? center - 8 : 0;
  const std::size_t end = std::min(bytes.size(), center + 9);
  std::ostringstream out;
  out << std::hex;
  for (std::size_t i = begin; i < end; ++i) {
    if (i == center) out << '[';
    const auto v = static_cast<unsigned>(bytes[i]);
    out << (v < 16 ? "0" : "") << v;
    if (i == center) out << ']';
    out << ' ';
  }
  return out.str();
}

std::string mismatch_report(std::span<const std::byte> actual, std::span<const std::byte> expected,
                            std::size_t first, std::size_t count, std::size_t last) {
  std::ostringstream out;
  out << count << " of " << expected.size() << " bytes differ; first at offset " << first
      << " (actual 0x" << std::hex << static_cast<unsigned>(actual[first]) << ", expected 0x"
      << static_cast<unsigned>(expected[first]) << std::dec << "), last at offset " << last
      << "\n  actual:   " << hex_window(actual, first)
      << "\n  expected: " << hex_window(expected, first);
  return out.str();
}
}  // namespace

::testing::AssertionResult bytes_equal(std::span<const std::byte> actual,
                                       std::span<const std::byte> expected) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "size differs: actual " << actual.size() << " bytes, expected " << expected.size();
  }
  if (std::memcmp(actual.data(), expected.data(), actual.size()) == 0) {
    return ::testing::AssertionSuccess();
  }
  std::size_t first = actual.size(), last = 0, count = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] != expected[i]) {
      first = std::min(first, i);
      last = i;
      ++count;
    }
  }
  return ::testing::AssertionFailure() << mismatch_report(actual, expected, first, count, last);
}

::testing::AssertionResult untouched_outside(std::span<const std::byte> buffer,
                                             std::span<const ByteRange> written,
                                             std::uint64_t sentinel_seed) {
  const auto sentinel = random_bytes(buffer.size(), sentinel_seed);
  // The gaps between the (clamped, sorted) written ranges; memcmp on each
  // keeps 64 MiB checks fast even in sanitizer builds.
  std::vector<ByteRange> ranges(written.begin(), written.end());
  std::sort(ranges.begin(), ranges.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
  std::size_t first = buffer.size(), last = 0, count = 0;
  auto check_gap = [&](std::uint64_t begin, std::uint64_t end) {
    if (begin >= end) return;
    if (std::memcmp(buffer.data() + begin, sentinel.data() + begin, end - begin) == 0) return;
    for (std::uint64_t i = begin; i < end; ++i) {
      if (buffer[i] != sentinel[i]) {
        first = std::min<std::size_t>(first, i);
        last = i;
        ++count;
      }
    }
  };
  std::uint64_t pos = 0;
  for (const auto& r : ranges) {
    const std::uint64_t begin = std::min<std::uint64_t>(r.offset, buffer.size());
    const std::uint64_t end =
        std::min<std::uint64_t>(buffer.size(), begin + std::min(r.length, buffer.size() - begin));
    check_gap(pos, begin);
    pos = std::max(pos, end);
  }
  check_gap(pos, buffer.size());
  if (count == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "bytes outside the written ranges were modified: "
                                       << mismatch_report(buffer, sentinel, first, count, last);
}

::testing::AssertionResult eventually_equal(std::span<const std::byte> actual,
                                            std::span<const std::byte> expected,
                                            std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (actual.size() == expected.size() &&
         std::memcmp(actual.data(), expected.data(), actual.size()) != 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  return bytes_equal(actual, expected);
}

}  // namespace fabric::test
