#pragma once
// The weights share of a run: a small bf16 model from the one trainer (rank 0) into two
// inference ranks (tensor parallel 2), version after version; each inference rank checks its
// arena against the single-process reference, then acknowledges the version to the trainer
// with an immediate of the trainer's ack block. With a victim (inference rank 0), the trainer
// updates until an update fails, then goes on with the survivor alone (a TP 1 schedule) from
// version kAfterDeath.

#include <memory>
#include <vector>

#include "fabric/engine.hpp"
#include "fabric/weights/executor.hpp"
#include "fabric/weights/planner.hpp"
#include "outcome.hpp"
#include "plan.hpp"
#include "published.hpp"

namespace fabric::workloads::test {

inline constexpr std::uint64_t kAfterDeath = 100;
inline constexpr std::uint32_t kAckImms = 256;

[[nodiscard]] weights::PlanInput tiny_model(std::uint32_t tp);

// An inference rank's arena and immediate block, and its side of each version.
class WeightsInference {
 public:
  static Result<std::unique_ptr<WeightsInference>> create(TransferEngine& engine);
  void publish(Published& p) const;
  // The victim verifies version 1 but leaves its acknowledgement to ack_last(), which it sends
  // just before it dies: the trainer's next update then meets a dead rank.
  Outcome run(const Plan& plan, std::uint32_t rank, const Published& trainer);
  Status ack_last(const Plan& plan, const Published& trainer);

 private:
  WeightsInference(TransferEngine& e) : engine_(e) {}
  // Waits up to `bound` for version v's immediates, checks the arena, then acknowledges (`ack`).
  Outcome version(const weights::PlanInput& in, const weights::Schedule& s, std::uint32_t index,
                  std::uint64_t v, const Plan& plan, std::chrono::milliseconds bound,
                  const MrDesc& acks, std::uint32_t ack_first, bool ack);
  Status ack(std::uint64_t v, const Plan& plan, const MrDesc& acks, std::uint32_t ack_first);
  TransferEngine& engine_;
  std::vector<std::byte> arena_;
  Registered reg_;
  ImmReservation block_;
};

// The trainer: its ack target and block, and the updates.
class WeightsTrainer {
 public:
  static Result<std::unique_ptr<WeightsTrainer>> create(TransferEngine& engine);
  void publish(Published& p) const;
  Outcome run(const Plan& plan, const std::vector<Published>& all);

 private:
  WeightsTrainer(TransferEngine& e) : engine_(e) {}
  TransferEngine& engine_;
  std::vector<std::byte> ack_memory_;
  Registered ack_reg_;
  ImmReservation acks_;
};

}  // namespace fabric::workloads::test
