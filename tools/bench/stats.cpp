#include "stats.hpp"

#include <algorithm>

namespace bench {

namespace {
double pick(const std::vector<std::uint64_t>& s, double q) {
  if (s.empty()) return 0;
  const auto i = static_cast<std::size_t>(q * static_cast<double>(s.size() - 1) + 0.5);
  return static_cast<double>(s[std::min(i, s.size() - 1)]) / 1e3;
}
}  // namespace

Figures summarize(std::vector<std::uint64_t>& lat, std::uint64_t payload_bytes,
                  std::uint64_t elapsed_ns) {
  std::sort(lat.begin(), lat.end());
  Figures f;
  f.ops = lat.size();
  f.seconds = static_cast<double>(elapsed_ns) / 1e9;
  if (f.seconds > 0) {
    f.gbps = static_cast<double>(payload_bytes) * 8.0 / f.seconds / 1e9;
    f.ops_per_s = static_cast<double>(f.ops) / f.seconds;
  }
  f.p50_us = pick(lat, 0.5);
  f.p99_us = pick(lat, 0.99);
  f.p999_us = pick(lat, 0.999);
  return f;
}

}  // namespace bench
