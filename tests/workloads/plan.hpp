#pragma once
// One run of workloads.one_engine: three processes, each with ONE engine on which KV transfers
// (ranks 0 and 1 send to rank 2), a weights update (trainer rank 0 -> inference ranks 1 and 2)
// and MoE dispatch/combine (all three) run at the same time, a fixed amount of each.

#include <chrono>
#include <cstdint>
#include <string>

#include "fabric_test/channel.hpp"

namespace fabric::workloads::test {

inline constexpr std::uint32_t kRanks = 3;
inline constexpr std::uint32_t kTrainer = 0;     // weights: the one trainer
inline constexpr std::uint32_t kKvReceiver = 2;  // KV: decodes what ranks 0 and 1 prefill
// Weights: process r (1, 2) is inference rank r - 1.
[[nodiscard]] constexpr std::uint32_t inference_index(std::uint32_t rank) { return rank - 1; }

struct Plan {
  std::string provider = "shm";
  // This rank SIGKILLs itself once its share before death is done (only rank 1 is supported:
  // a KV sender, an inference rank and an MoE rank); -1: nobody dies.
  std::int32_t victim = -1;
  // Engines per process: 1, every workload on it (the library's design), or 3, one per workload
  // (how a process had to run them before issue 26), for the footprint figure (docs/api.md).
  std::uint32_t engines = 1;
  std::uint32_t kv_requests = 6;      // per KV sender
  std::uint32_t kv_before_death = 2;  // the victim's sender serves these
  std::uint32_t weights_versions = 3;
  std::uint32_t moe_iterations = 10;
  std::uint32_t moe_before_death = 3;
  std::uint32_t moe_after_rebuild = 5;
  // The engines' request_timeout and the bound of every workload's wait.
  std::chrono::milliseconds request_timeout{20000};
  std::chrono::milliseconds wait_bound{30000};
  std::chrono::milliseconds moe_timeout{20000};  // MoeConfig::timeout
};

// A rank's whole life; its report ("ok key=value ..." or "error ...") goes to the parent.
int run_rank(const Plan& plan, std::uint32_t rank, fabric::test::Channel& channel);

}  // namespace fabric::workloads::test
