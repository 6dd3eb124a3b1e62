#pragma once
// Figures the tools print, in one vocabulary: sizes in B/KiB/MiB, rates in
// Gbit/s (1e9 bit/s), and percentiles only where the samples support them.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace tools {

// At least this many samples must lie beyond a percentile for it to be
// reported: p50 needs 10 samples, p99 500, p99.9 5000.
inline constexpr double kSamplesBeyondQuantile = 5;

[[nodiscard]] inline bool supports_quantile(std::size_t samples, double q) {
  return static_cast<double>(samples) * (1.0 - q) >= kSamplesBeyondQuantile;
}

// The q-quantile of ascending `sorted` (nearest rank), or NaN (JSON null,
// printed "-") when too few samples support it.
template <typename T>
[[nodiscard]] double quantile(const std::vector<T>& sorted, double q) {
  if (sorted.empty() || !supports_quantile(sorted.size(), q)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  const auto i = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return static_cast<double>(sorted[std::min(i, sorted.size() - 1)]);
}

// "4 KiB", "64 MiB", "100 B".
[[nodiscard]] inline std::string human_bytes(std::uint64_t n) {
  if (n >= (1ULL << 20) && n % (1ULL << 20) == 0) return std::to_string(n >> 20) + " MiB";
  if (n >= (1ULL << 10) && n % (1ULL << 10) == 0) return std::to_string(n >> 10) + " KiB";
  return std::to_string(n) + " B";
}

}  // namespace tools
