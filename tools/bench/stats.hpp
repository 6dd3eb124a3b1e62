#pragma once
// Figures of one timed round.

#include <chrono>
#include <cstdint>
#include <vector>

namespace bench {

inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

struct Figures {
  double gbps = 0;       // payload bits / wall time / 1e9
  double ops_per_s = 0;  // requests (writes, batches, round trips) per second
  double p50_us = 0, p99_us = 0, p999_us = 0;
  std::uint64_t ops = 0;
  double seconds = 0;
};

// `latencies_ns` is sorted in place.
Figures summarize(std::vector<std::uint64_t>& latencies_ns, std::uint64_t payload_bytes,
                  std::uint64_t elapsed_ns);

}  // namespace bench
