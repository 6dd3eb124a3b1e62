// A rank that dies mid-run: every survivor's dispatch or combine returns
// an error naming it within the configured timeout, and the survivors rebuild a
// group without it (a world size that is not a power of two) that again equals
// the dense reference.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "fabric/engine.hpp"
#include "fabric/moe/group.hpp"
#include "fabric_test/env.hpp"
#include "ranks.hpp"
#include "scenario.hpp"

namespace fabric::moe::test {
namespace {

constexpr std::chrono::milliseconds kTimeout{1500};

Scenario dying(std::uint32_t world, std::uint32_t node, std::int32_t victim,
              ProxyMode proxy = ProxyMode::inline_steps) {
  Scenario sc;
  auto& m = sc.config;
  m.world_size = world;
  m.num_experts = 2 * world;
  m.hidden = 40;
  m.top_k = 4;
  m.max_tokens_per_rank = 16;
  m.max_private_tokens = 4;
  m.node_size = node;
  m.timeout = kTimeout;
  sc.routing = Routing::uniform;
  sc.iterations = 6;
  sc.victim = victim;
  sc.die_at = 3;
  sc.iterations_after_rebuild = 10;
  sc.proxy = proxy;
  return sc;
}

void expect_survivors_name_the_victim(const Scenario& sc) {
  fabric::test::use_loopback_environment();
  const auto outcomes = run_ranks(
      sc.config.world_size,
      [&](std::uint32_t rank, fabric::test::Channel& ch) { return run_scenario_rank(sc, rank, ch); },
      std::chrono::seconds(120));
  for (std::uint32_t r = 0; r < sc.config.world_size; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const auto& out = outcomes[r];
    if (static_cast<std::int32_t>(r) == sc.victim) {
      EXPECT_EQ(out.exit.kind, fabric::test::ChildExit::Kind::signaled) << out.exit.to_string();
      continue;
    }
    ASSERT_TRUE(out.exit.ok()) << out.exit.to_string() << ": " << out.report;
    const auto named = out.report.find(" named=");
    ASSERT_NE(named, std::string::npos) << out.report;
    // Exactly the dead rank: a survivor's scatter still reaches the peers after a refused slice
    // (the engine posts past it), so no survivor is starved into blaming another survivor.
    const std::string who = out.report.substr(named + 7, out.report.find(' ', named + 7) - named - 7);
    EXPECT_EQ(who, std::to_string(sc.victim)) << out.report;
    // Within the timeout of the wait that noticed it (plus scheduling slack on 2 cores).
    const auto ms = report_value(out.report, "detect_ms");
    EXPECT_GE(ms, 0) << out.report;
    EXPECT_LE(ms, kTimeout.count() + 1500) << out.report;
    // The rebuilt group ran its iterations exactly.
    EXPECT_EQ(report_value(out.report, "iterations"), sc.iterations_after_rebuild) << out.report;
    EXPECT_EQ(report_value(out.report, "stray"), 0) << out.report;
    std::printf("[ moe ] survivor %u: %s\n", r, out.report.c_str());
  }
}

TEST(MoeFailure, ADeadRankIsNamedByEverySurvivorWhoThenRebuildWithoutIt) {
  expect_survivors_name_the_victim(dying(4, 1, 2));
}

// On a connected provider the survivors' abort notices to each other, sent as they fail
// together, must not land after the other side deregistered its arena: tcp answers such a
// WRITE by closing the connection, and the rebuilt group's first WRITEs over it were lost
// (its routes never came; ~MoeGroup's leave handshake, docs/moe.md "Leaving a group").
TEST(MoeFailure, OnTcpTheSurvivorsRebuildOverConnectionsTheirAbortNoticesLeftWhole) {
  Scenario sc = dying(4, 1, 2);
  sc.provider = "tcp";
  sc.rebuild_on_same_engine = true;
  expect_survivors_name_the_victim(sc);
}

TEST(MoeFailure, ADeadNodePeerIsNamedByEverySurvivorWhoThenRebuildWithoutIt) {
  expect_survivors_name_the_victim(dying(4, 2, 1));
}

}  // namespace
}  // namespace fabric::moe::test

namespace fabric::moe::test {
namespace {

TEST(MoeFailure, ADeadRankIsNamedThroughTheProxyThreadToo) {
  expect_survivors_name_the_victim(dying(4, 2, 3, ProxyMode::watcher));
}

}  // namespace
}  // namespace fabric::moe::test

namespace fabric::moe::test {
namespace {

TEST(MoeCreate, RanksWithDifferentShapesRefuseEachOther) {
  fabric::test::use_loopback_environment();
  const auto outcomes = run_ranks(
      2,
      [](std::uint32_t rank, fabric::test::Channel& ch) {
        auto engine = TransferEngine::create(EngineConfig{});
        if (!engine.ok()) return 4;
        MoeConfig c;
        c.world_size = 2;
        c.rank = rank;
        c.num_experts = 4;
        c.hidden = 16 + rank;  // rank 1 disagrees
        c.max_tokens_per_rank = 8;
        c.top_k = 2;
        auto group = MoeGroup::create(**engine, c, relay_all_gather(ch));
        report(ch, group.ok() ? "created" : group.status().to_string());
        return group.ok() ? 1 : 0;
      },
      std::chrono::seconds(60));
  for (const auto& o : outcomes) {
    EXPECT_TRUE(o.exit.ok()) << o.exit.to_string() << ": " << o.report;
    EXPECT_NE(o.report.find("different config"), std::string::npos) << o.report;
  }
}

}  // namespace
}  // namespace fabric::moe::test
