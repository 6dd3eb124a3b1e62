#pragma once
// Command-line settings shared by both roles of fabric-demo.

#include <chrono>
#include <cstdint>
#include <string>

namespace demo {

struct Options {
  std::string provider = "shm";
  // IP providers bind here; `iface` names the interface (FI_TCP_IFACE).
  std::string bind = "127.0.0.1";
  std::string iface;
  // Two hosts: the target serves on `listen` (HOST:PORT), the writer
  // connects to it; neither set: the writer forks the target here.
  std::string listen;
  std::string connect;
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
