#include "stats.hpp"

#include <algorithm>

#include "common/stats.hpp"

namespace bench {

namespace {
// In microseconds; NaN where the samples are too few (tools/common/stats.hpp).
double pick(const std::vector<std::uint64_t>& s, double q) { return tools::quantile(s, q) / 1e3; }
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
