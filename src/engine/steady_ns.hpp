#pragma once
// steady_clock in nanoseconds, the unit of PostTiming and of the worker's latency stamps.

#include <chrono>
#include <cstdint>

namespace fabric::engine {

[[nodiscard]] inline std::uint64_t to_ns(std::chrono::steady_clock::time_point t) noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

[[nodiscard]] inline std::chrono::steady_clock::time_point from_ns(std::uint64_t ns) noexcept {
  return std::chrono::steady_clock::time_point(
      std::chrono::nanoseconds(static_cast<std::int64_t>(ns)));
}

[[nodiscard]] inline std::uint64_t now_ns() noexcept {
  return to_ns(std::chrono::steady_clock::now());
}

}  // namespace fabric::engine
