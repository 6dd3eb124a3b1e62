#pragma once
// What one workload did in a rank: counts the parent checks, and the immediates it claimed (so
// that the rank can compare them with every immediate its engine received).

#include <cstdint>
#include <string>

namespace fabric::workloads::test {

struct Outcome {
  std::uint32_t done = 0;      // requests, versions or iterations that completed and verified
  std::uint32_t failed = 0;    // ones that failed as the plan expects (a dead peer)
  long long fail_ms = -1;      // how long the first expected failure took to surface
  std::uint64_t imms = 0;      // immediates this workload counted on this rank
  std::string error;           // the first unexpected failure; empty when none

  [[nodiscard]] bool ok() const { return error.empty(); }
  void fail(const std::string& what) {
    if (error.empty()) error = what;
  }
};

}  // namespace fabric::workloads::test
