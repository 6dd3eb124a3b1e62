// workloads.one_engine: three processes, each with ONE engine shared by KV, weights and MoE
// running at the same time (plan.hpp). Every byte is checked against a reference in the ranks;
// here, every count is exact and every immediate an engine received was claimed by exactly the
// workload it was meant for. With rank 1 SIGKILLed mid-run, the others' requests to it fail in
// bounded time and their work among themselves carries on, checked the same way.

#include <gtest/gtest.h>

#include <cstdio>

#include "../moe/ranks.hpp"
#include "../moe/scenario.hpp"
#include "fabric_test/env.hpp"
#include "plan.hpp"

namespace fabric::workloads::test {
namespace {

using moe::test::report_value;
using namespace std::chrono_literals;

class OneEngine : public ::testing::TestWithParam<std::string> {
 protected:
  std::vector<moe::test::RankOutcome> run(const Plan& plan) {
    fabric::test::use_loopback_environment();
    auto outcomes = moe::test::run_ranks(
        kRanks, [&](std::uint32_t rank, fabric::test::Channel& ch) { return run_rank(plan, rank, ch); }, 120s);
    for (std::uint32_t r = 0; r < kRanks; ++r)
      std::printf("[ one engine ] rank %u: %s: %s\n", r, outcomes[r].exit.to_string().c_str(),
                  outcomes[r].report.c_str());
    return outcomes;
  }
};

long long value(const moe::test::RankOutcome& o, const std::string& key) { return report_value(o.report, key); }

TEST_P(OneEngine, KvWeightsAndMoeShareEachEngineWithEveryCountExact) {
  Plan plan;
  plan.provider = GetParam();
  const auto out = run(plan);
  for (std::uint32_t r = 0; r < kRanks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(out[r].exit.ok()) << out[r].exit.to_string() << ": " << out[r].report;
    ASSERT_EQ(out[r].report.rfind("ok", 0), 0u) << out[r].report;
    // KV: the receiver got every request of both senders; each sender served all of its own.
    EXPECT_EQ(value(out[r], "kv_done"), r == kKvReceiver ? 2 * plan.kv_requests : plan.kv_requests);
    EXPECT_EQ(value(out[r], "weights_done"), plan.weights_versions);
    EXPECT_EQ(value(out[r], "moe_done"), plan.moe_iterations);
    EXPECT_EQ(value(out[r], "moe_stray"), 0);
    // Every immediate that reached this engine was counted by the one workload it belonged to:
    // none was taken by another workload's counter (that one would show a surplus or a shortfall).
    EXPECT_GT(value(out[r], "imms_received"), 0);
    EXPECT_EQ(value(out[r], "imms_received"), value(out[r], "imms_claimed"));
  }
}

// DISABLED (a recorded expected failure, not a skip). Runs of 2026-12-03 evening, after the
// survivor's first post-death weights wait was lengthened, the engine stopped letting a
// refusing peer hold up the pending queue, and a request its provider holds while the peer
// completes others began to fail (6 x request_timeout): shm passed 2 of 3, tcp 0 of 3.
// - shm: after rank 1 is SIGKILLed, rank 0's WRITEs to the LIVE rank 2 stall: first held by
//   libfabric 1.17's shm past every completion to rank 2 (now failed by the engine's bound
//   instead of hanging), then, in 1 of 3 runs, rank 2 completes nothing for 5 s and the next
//   version's WRITE fails as to a silent peer (a dead peer's entry in a survivor's shm region,
//   docs/reliability.md#shm-locks, is the suspect).
// - tcp: the survivors' MoE group rebuilt on the same engines: rank 2 never counts rank 0's
//   routes of the first iteration, while rank 0 counts rank 2's; no post was refused (cause
//   not found; the immediate agreement and the write path are the next suspects).
// Run it with
// `tests/workloads/fabric_workloads_tests --gtest_also_run_disabled_tests --gtest_filter='*Killed*'`.
TEST_P(OneEngine, DISABLED_ARankKilledMidRunFailsTheOthersRequestsToItWhileTheirOwnWorkCarriesOn) {
  Plan plan;
  plan.provider = GetParam();
  plan.victim = 1;
  // A dead peer is noticed within these (the engine's and MoE's), not the healthy run's 20 s.
  plan.request_timeout = 5000ms;
  plan.moe_timeout = 4000ms;
  const auto out = run(plan);
  EXPECT_EQ(out[1].exit.kind, fabric::test::ChildExit::Kind::signaled) << out[1].exit.to_string() << ": " << out[1].report;
  for (std::uint32_t r : {0u, 2u}) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(out[r].exit.ok()) << out[r].exit.to_string() << ": " << out[r].report;
    ASSERT_EQ(out[r].report.rfind("ok", 0), 0u) << out[r].report;
    // MoE: the iteration after the death failed naming rank 1 (checked in the rank) within a few
    // timeouts, and the two survivors' rebuilt group ran all its iterations exactly.
    EXPECT_EQ(value(out[r], "moe_failed"), 1);
    EXPECT_LE(value(out[r], "moe_fail_ms"), 3 * plan.moe_timeout.count() + 5000);
    EXPECT_EQ(value(out[r], "moe_done"), plan.moe_after_rebuild);
    EXPECT_EQ(value(out[r], "moe_stray"), 0);
  }
  // KV: the receiver's request to the dead sender failed in bounded time (liveness: two missed
  // heartbeats and the request timeout, then the quarantine), its requests to rank 0 all landed.
  EXPECT_EQ(value(out[2], "kv_failed"), 1);
  EXPECT_LE(value(out[2], "kv_fail_ms"), 2 * 1000 + plan.request_timeout.count() + 1000 + 15000);
  EXPECT_EQ(value(out[2], "kv_done"), plan.kv_requests + plan.kv_before_death);
  EXPECT_EQ(value(out[0], "kv_done"), plan.kv_requests);
  // Weights: an update met the dead inference rank and failed within the executor's bound; the
  // trainer then updated the survivor alone, version after version, each checked there.
  EXPECT_EQ(value(out[0], "weights_failed"), 1);
  EXPECT_LE(value(out[0], "weights_fail_ms"), plan.wait_bound.count() + 5000);
  EXPECT_EQ(value(out[0], "weights_done"), 1 + plan.weights_versions - 1);
  EXPECT_EQ(value(out[2], "weights_done"), 1 + plan.weights_versions - 1);
}

INSTANTIATE_TEST_SUITE_P(Providers, OneEngine, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace fabric::workloads::test
