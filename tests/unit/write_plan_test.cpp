#include "engine/write_plan.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace fabric::engine
