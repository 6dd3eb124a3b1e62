#include "engine/write_plan.hpp"
#include "fabric/imm_counts.hpp"

#include <gtest/gtest.h>

#include <string>

namespace fabric::engine {
namespace {

std::uint64_t total_length(const std::vector<WritePiece>& pieces) {
  std::uint64_t sum = 0;
  for (const auto& p : pieces) sum += p.length;
  return sum;
}

TEST(WritePlan, DefaultRoutingMakesOnePiecePerDomain) {
  auto plan = plan_single_write(1000, WriteRouting::all_domains(), 4);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 4u);
  for (std::uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ((*plan)[i].domain, i);
    EXPECT_EQ((*plan)[i].length, 250u);
    EXPECT_EQ((*plan)[i].offset, 250u * i);
  }
}

TEST(WritePlan, UnevenLengthGivesTheRemainderToTheFirstPieces) {
  auto plan = plan_single_write(10, WriteRouting::shards(3), 2);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 3u);
  EXPECT_EQ((*plan)[0].length, 4u);
  EXPECT_EQ((*plan)[1].length, 3u);
  EXPECT_EQ((*plan)[2].length, 3u);
  EXPECT_EQ((*plan)[2].offset, 7u);
  EXPECT_EQ((*plan)[2].domain, 0u);  // round robin wraps
}

TEST(WritePlan, ZeroLengthPiecesAreKeptSoImmCountsStayFixed) {
  auto plan = plan_single_write(2, WriteRouting::shards(4), 4);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 4u);
  EXPECT_EQ((*plan)[2].length, 0u);
  EXPECT_EQ((*plan)[3].length, 0u);
  EXPECT_EQ(total_length(*plan), 2u);
}

TEST(WritePlan, PinnedRoutingUsesOnlyThatDomain) {
  auto plan = plan_single_write(123, WriteRouting::pinned(2), 4);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_EQ((*plan)[0].domain, 2u);
  EXPECT_EQ((*plan)[0].length, 123u);
}

TEST(WritePlan, PinningAMissingDomainIsAnError) {
  auto plan = plan_single_write(1, WriteRouting::pinned(4), 4);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Errc::invalid_argument);
}

TEST(WritePlan, PiecesLongerThanOneWriteAreSplitEachCarryingTheImm) {
  // With a 100-byte WRITE limit, 2 shards of 250 become 3 WRITEs each.
  auto plan = plan_single_write(500, WriteRouting::shards(2), 2, 100);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 6u);
  EXPECT_EQ(total_length(*plan), 500u);
  EXPECT_EQ((*plan)[2].length, 50u);
  EXPECT_EQ((*plan)[2].domain, 0u);
  EXPECT_EQ((*plan)[3].domain, 1u);
  EXPECT_EQ((*plan)[5].offset, 450u);
}

TEST(WritePlan, AbsurdShardCountsAreRejected) {
  auto plan = plan_single_write(1, WriteRouting::shards(kMaxShards + 1), 1);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Errc::invalid_argument);
}

TEST(WritePlan, UndefinedRoutingModesAreRejected) {
  for (const unsigned mode : {2u, 3u, 255u}) {
    WriteRouting routing;
    routing.mode = static_cast<WriteRouting::Mode>(mode);
    auto plan = plan_single_write(64, routing, 2);
    ASSERT_FALSE(plan.ok()) << "mode " << mode << " was planned";
    EXPECT_EQ(plan.status().code(), Errc::invalid_argument);
    EXPECT_NE(plan.status().message().find(std::to_string(mode)), std::string::npos)
        << plan.status().to_string();
  }
}

}  // namespace
}  // namespace fabric::engine

namespace fabric::engine {
namespace {

std::vector<ScatterSlice> three_slices() {
  return {{MrDesc{}, 10, 0, 100}, {MrDesc{}, 0, 10, 200}, {MrDesc{}, 7, 10, 300}};
}

TEST(ScatterPlan, ShardPeersGivesOneWritePerPeerRoundRobin) {
  auto plan = plan_scatter(three_slices(), ScatterRouting::peers(), 2);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 3u);
  EXPECT_EQ((*plan)[0].domain, 0u);
  EXPECT_EQ((*plan)[1].domain, 1u);
  EXPECT_EQ((*plan)[2].domain, 0u);
  EXPECT_EQ((*plan)[1].length, 0u);  // empty slices still notify their peer
  EXPECT_EQ((*plan)[2].dst_offset, 300u);
}

TEST(ScatterPlan, ShardBytesGivesEveryPeerOneWritePerDomain) {
  auto plan = plan_scatter(three_slices(), ScatterRouting::bytes(), 4);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 12u);
  // Peer 2's 7 bytes: 2 + 2 + 2 + 1, contiguous from its offsets.
  EXPECT_EQ((*plan)[8].peer, 2u);
  EXPECT_EQ((*plan)[8].length, 2u);
  EXPECT_EQ((*plan)[11].length, 1u);
  EXPECT_EQ((*plan)[11].src_offset, 16u);
  EXPECT_EQ((*plan)[11].dst_offset, 306u);
  EXPECT_EQ((*plan)[11].domain, 3u);
}

TEST(ScatterPlan, UndefinedRoutingModesAreRejected) {
  for (const unsigned mode : {3u, 4u, 255u}) {
    ScatterRouting routing;
    routing.mode = static_cast<ScatterRouting::Mode>(mode);
    auto plan = plan_scatter(three_slices(), routing, 2);
    ASSERT_FALSE(plan.ok()) << "mode " << mode << " was planned";
    EXPECT_EQ(plan.status().code(), Errc::invalid_argument);
  }
}

TEST(ScatterPlan, SingleDomainPinsEverySlice) {
  auto plan = plan_scatter(three_slices(), ScatterRouting::pinned(1), 2);
  ASSERT_TRUE(plan.ok());
  for (const auto& p : *plan) EXPECT_EQ(p.domain, 1u);
  EXPECT_FALSE(plan_scatter(three_slices(), ScatterRouting::pinned(2), 2).ok());
}

// The public counts are the plans' sizes: one rule, walked by both (fabric/imm_counts.hpp).
TEST(ImmCounts, SingleWriteCountIsThePlansLengthForEveryRouting) {
  const std::uint64_t lengths[] = {0, 1, 7, 4096, kMaxWriteBytes - 1, kMaxWriteBytes,
                                   kMaxWriteBytes + 1, 3 * kMaxWriteBytes + 2};
  const WriteRouting routings[] = {WriteRouting::all_domains(), WriteRouting::shards(3),
                                   WriteRouting::shards(1), WriteRouting::pinned(1)};
  for (std::uint32_t k : {1u, 2u, 4u}) {
    for (std::uint64_t length : lengths) {
      for (const WriteRouting& r : routings) {
        auto plan = plan_single_write(length, r, k);
        auto count = single_write_imm_count(length, k, r);
        ASSERT_EQ(plan.ok(), count.ok()) << length << " over " << k;
        if (plan.ok()) EXPECT_EQ(*count, plan->size()) << length << " over " << k;
      }
    }
  }
}

TEST(ImmCounts, ScatterCountIsEachPeersShareOfThePlan) {
  for (const ScatterRouting& r :
       {ScatterRouting::peers(), ScatterRouting::bytes(), ScatterRouting::pinned(1)}) {
    const std::vector<ScatterSlice> slices(3, ScatterSlice{{}, 3 * kMaxWriteBytes + 5, 0, 0});
    auto plan = plan_scatter(slices, r, 2);
    ASSERT_TRUE(plan.ok());
    auto count = scatter_imm_count(slices[0].length, 2, r);
    ASSERT_TRUE(count.ok());
    for (std::uint32_t peer = 0; peer < 3; ++peer) {
      std::uint64_t n = 0;
      for (const auto& p : *plan) n += p.peer == peer ? 1 : 0;
      EXPECT_EQ(n, *count) << "peer " << peer;
    }
  }
}

TEST(ImmCounts, TheDocumentedTableAndItsErrors) {
  EXPECT_EQ(single_write_imm_count(4096, 1).value(), 1u);
  EXPECT_EQ(single_write_imm_count(1, 2).value(), 2u);  // an empty piece still carries the imm
  EXPECT_EQ(single_write_imm_count(10, 4, WriteRouting::shards(3)).value(), 3u);
  EXPECT_EQ(paged_writes_imm_count(17), 17u);
  EXPECT_EQ(single_write_imm_count(1, 0).status().code(), Errc::invalid_argument);
  EXPECT_EQ(single_write_imm_count(1, 2, WriteRouting::pinned(2)).status().code(),
            Errc::invalid_argument);
  EXPECT_EQ(scatter_imm_count(1, 2, ScatterRouting::pinned(5)).status().code(),
            Errc::invalid_argument);
}

}  // namespace
}  // namespace fabric::engine
