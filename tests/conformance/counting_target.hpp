#pragma once
// A child that is the target of group operations: it registers a zeroed
// region, counts one immediate value, and on each "round" command waits for
// the expected number of arrivals, checks no surplus came, and sends the
// whole region back so the parent verifies every byte.

#include <cstdint>
#include <optional>
#include <vector>

#include "fabric/fabric.hpp"
#include "fabric_test/child_process.hpp"
#include "fixture.hpp"

namespace fabric::conformance {

class CountingTarget {
 public:
  // Forks the target. Call before the parent creates its own engine.
  CountingTarget(const EngineConfig& config, std::uint64_t region_size, std::uint32_t imm);

  [[nodiscard]] ::testing::AssertionResult connect();
  [[nodiscard]] const MrDesc& dst() const { return dst_; }

  // Asks for `expected` more arrivals; returns the region afterwards, or
  // nullopt (with the child's reason on stderr) when the count was not exact.
  std::optional<std::vector<std::byte>> round(std::uint64_t expected);
  ::testing::AssertionResult finish();

 private:
  ChildProcess child_;
  MrDesc dst_;
};

}  // namespace fabric::conformance
