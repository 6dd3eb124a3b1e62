#pragma once
// Command-line settings shared by both roles of fabric-demo.

#include <chrono>
#include <cstdint>
#include <string>

namespace demo {

struct Options {
  std::string provider = "shm";
  std::string json_path;  // empty: no JSON report
  bool quick = false;
  std::uint64_t seed = 0x5eedf00dULL;
  // Internal: set only on the process the writer spawns.
  std::string role = "writer";
  int bootstrap_fd = -1;
};

// One figure for every bounded wait, so a stuck peer always surfaces as an
// error instead of a hang.
inline constexpr std::chrono::seconds kWaitLimit{30};

// Both ends register a region this large; it bounds every workload.
inline constexpr std::uint64_t kRegionBytes = 64ULL << 20;

}  // namespace demo
