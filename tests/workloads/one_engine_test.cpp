// workloads.one_engine: three processes, each with ONE engine shared by KV, weights and MoE
// running at the same time (plan.hpp). Every byte is checked against a reference in the ranks;
// here, every count is exact and every immediate an engine received was claimed by exactly the
// workload it was meant for. With rank 1 SIGKILLed mid-run (tcp), the others' requests to it
// fail in bounded time and their work among themselves carries on, checked the same way.

#include <gtest/gtest.h>

#include <cstdio>
#include <map>

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

// Every rank of a run without a victim did all of its work, every count exact.
void expect_every_count_exact(const Plan& plan, const std::vector<moe::test::RankOutcome>& out) {
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

TEST_P(OneEngine, KvWeightsAndMoeShareEachEngineWithEveryCountExact) {
  Plan plan;
  plan.provider = GetParam();
  expect_every_count_exact(plan, run(plan));
}

// The footprint docs/api.md records: the same work with one engine per workload (three per
// process, as before issue 26) and with one shared engine. Thread counts are exact figures of
// the library's design (each engine brings its own worker per Domain group and callback
// thread), so the comparison is asserted; memory is printed, not judged.
TEST_P(OneEngine, OneSharedEngineRunsTheSameWorkOnFewerThreadsThanOnePerWorkload) {
  std::map<std::uint32_t, std::vector<moe::test::RankOutcome>> runs;
  for (std::uint32_t engines : {3u, 1u}) {
    Plan plan;
    plan.provider = GetParam();
    plan.engines = engines;
    SCOPED_TRACE(std::to_string(engines) + " engines per process");
    runs[engines] = run(plan);
    expect_every_count_exact(plan, runs[engines]);
    if (HasFailure()) return;
  }
  for (std::uint32_t r = 0; r < kRanks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const auto& one = runs[1][r];
    const auto& three = runs[3][r];
    std::printf("[ footprint ] %s rank %u: 3 engines %lld threads (library %lld), RSS %lld KiB, "
                "peak %lld KiB; 1 engine %lld threads (library %lld), RSS %lld KiB, peak %lld KiB\n",
                GetParam().c_str(), r, value(three, "process_threads"), value(three, "library_thread_count"),
                value(three, "rss_kib"), value(three, "hwm_kib"), value(one, "process_threads"),
                value(one, "library_thread_count"), value(one, "rss_kib"), value(one, "hwm_kib"));
    EXPECT_EQ(value(one, "engines"), 1);
    EXPECT_EQ(value(three, "engines"), 3);
    // Two engines fewer: at least their worker and callback threads each.
    EXPECT_LE(value(one, "library_thread_count") + 4, value(three, "library_thread_count"));
    EXPECT_LT(value(one, "process_threads"), value(three, "process_threads"));
  }
}

// With a rank killed: tcp only. On libfabric 1.17's shm a survivor's WRITE outstanding to the
// rank when it dies wedges that survivor's endpoint for every peer (no later non-inline
// completion arrives; docs/reliability.md, field finding 3, ofiwg/libfabric#9853). Here the
// trainer's next version is always on its way to the victim as it dies, so on shm the trainer's
// WRITEs to the live rank 2 then stall and fail at the engine's bound (2 of 4 runs on
// 2026-12-05), which is that provider's limit, not the engines' sharing. On tcp this case failed
// 5 of 6 runs before ~MoeGroup's leave handshake (docs/moe.md "Leaving a group"): the two
// survivors' abort notices hit each other's already deregistered arenas, tcp closed the
// connection under them, and the rebuilt group's first routes were lost.
class OneEngineKilled : public OneEngine {};

TEST_P(OneEngineKilled, ARankKilledMidRunFailsTheOthersRequestsToItWhileTheirOwnWorkCarriesOn) {
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
INSTANTIATE_TEST_SUITE_P(Providers, OneEngineKilled, ::testing::Values("tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace fabric::workloads::test
