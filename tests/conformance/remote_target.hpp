#pragma once
// A child process that is the TARGET of the parent's writes: it registers a
// region filled with the sentinel pattern, hands out its MrDesc, and on
// command reports immediate arrivals and whether the region was touched.
// Used where the parent itself submits (validation, stop(), dereg, loopback).

#include <cstdint>
#include <optional>

#include "fabric/fabric.hpp"
#include "fabric_test/child_process.hpp"
#include "fixture.hpp"

namespace fabric::conformance {

class RemoteTarget {
 public:
  // Forks the target. Call before the parent creates its own engine.
  RemoteTarget(const EngineConfig& config, std::uint64_t region_size);

  // Waits for the target's engine and its region's descriptor.
  [[nodiscard]] ::testing::AssertionResult connect();
  [[nodiscard]] const MrDesc& dst() const { return dst_; }
  [[nodiscard]] const NetAddr& addr() const { return dst_.owner(); }

  // Arrivals of `imm` since the previous call for it: waits (bounded) until
  // `expected` have come, then watches a quiet period for surplus ones.
  std::optional<std::uint64_t> imm_arrivals(std::uint32_t imm, std::uint64_t expected);
  // Whether every byte of the region still holds the sentinel.
  ::testing::AssertionResult untouched();
  // dereg_mr() of the region on the target (the memory stays allocated).
  Status dereg();
  // Stops the target's engine and reaps the process.
  ::testing::AssertionResult finish();

  [[nodiscard]] ChildProcess& process() { return child_; }

 private:
  ChildProcess child_;
  MrDesc dst_;
};

}  // namespace fabric::conformance
