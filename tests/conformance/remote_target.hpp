#pragma once
// A child process that is the TARGET of the parent's writes: it registers a
// region filled with the sentinel pattern, hands out its MrDesc, and on
// command reports immediate arrivals and whether the region was touched.
// Used where the parent itself submits (validation, stop(), dereg, loopback).

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

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

// A fixture for tests where this process submits to a RemoteTarget: the
// target forked first, then this process's engine and a registered source.
class RemoteTargetTest : public ProviderTest {
 protected:
  // Call from SetUp(); skips with the provider's reason where it cannot run.
  void set_up(std::uint64_t dst_size, std::uint64_t src_size, std::byte src_fill);
  void TearDown() override;

  // Proves rejected requests sent nothing: one valid immediate-only write
  // with the same imm must be the only arrival, the region intact, and no
  // on_done run for the rejected submissions.
  void expect_nothing_was_sent(std::uint32_t imm);

  std::unique_ptr<RemoteTarget> target_;
  std::vector<std::byte> src_;
  MrHandle src_mr_;
  std::shared_ptr<CompletionCounter> done_ = std::make_shared<CompletionCounter>();
  std::unique_ptr<TransferEngine> engine_;
};

}  // namespace fabric::conformance
