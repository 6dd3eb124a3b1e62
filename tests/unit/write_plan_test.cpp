#include "engine/write_plan.hpp"

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

}  // namespace
}  // namespace fabric::engine
