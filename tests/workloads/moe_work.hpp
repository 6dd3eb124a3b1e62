#pragma once
// The MoE share of a run: a group of all three ranks, iterations of dispatch + expert + combine
// on the host device, each checked against the dense reference (tests/moe/scenario.hpp). With a
// victim, the survivors' iteration after its death fails naming it, and they rebuild a group of
// two on the same engines and run on.

#include <memory>

#include "fabric/engine.hpp"
#include "fabric/moe/group.hpp"
#include "fabric_test/channel.hpp"
#include "outcome.hpp"
#include "plan.hpp"

namespace fabric::workloads::test {

class MoeWork {
 public:
  // Collective (every rank, through the parent's relay).
  static Result<std::unique_ptr<MoeWork>> create(TransferEngine& engine, const Plan& plan,
                                                 std::uint32_t rank, fabric::test::Channel& channel);
  Outcome run(const Plan& plan, std::uint32_t rank, fabric::test::Channel& channel);
  // Immediates left unconsumed by the last group (0 unless a count drifted).
  [[nodiscard]] std::uint64_t stray() const { return stray_; }

 private:
  MoeWork(TransferEngine& e) : engine_(e) {}
  TransferEngine& engine_;
  std::unique_ptr<moe::MoeGroup> group_;
  std::uint64_t stray_ = 0;
};

}  // namespace fabric::workloads::test
