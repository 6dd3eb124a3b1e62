// Single-process checks of the pure parts: config validation, expert
// placement, buffer sizing and the routes plan's input checks.
#include <gtest/gtest.h>

#include <vector>

#include "fabric/moe/layout.hpp"
#include "fabric/moe/plan.hpp"

namespace fabric::moe {
namespace {

MoeConfig base() {
  MoeConfig c;
  c.world_size = 4;
  c.num_experts = 10;
  c.hidden = 7;
  c.top_k = 3;
  c.max_tokens_per_rank = 8;
  c.max_private_tokens = 2;
  return c;
}

TEST(MoeConfig, BadFieldsAreNamed) {
  auto c = base();
  c.top_k = 17;
  EXPECT_NE(validate(c).message().find("top_k 17"), std::string::npos);
  c = base();
  c.rank = 4;
  EXPECT_NE(validate(c).message().find("rank 4"), std::string::npos);
  c = base();
  c.dp_size = 3;
  EXPECT_NE(validate(c).message().find("dp_size 3"), std::string::npos);
  c = base();
  c.hidden = 1u << 28;
  EXPECT_NE(validate(c).message().find("1 GiB"), std::string::npos);
  EXPECT_TRUE(validate(base()).ok());
}

TEST(MoePlacement, ExpertsAreSpreadInContiguousBlocksForAnyCounts) {
  for (std::uint32_t n : {1u, 3u, 4u, 7u}) {
    for (std::uint32_t e : {1u, 5u, 10u, 600u}) {
      auto c = base();
      c.world_size = n;
      c.num_experts = e;
      const Placement p(c);
      std::uint32_t total = 0;
      for (std::uint32_t r = 0; r < n; ++r) {
        total += p.local_experts(r);
        for (std::uint32_t x = p.first_expert(r); x < p.first_expert(r) + p.local_experts(r); ++x)
          ASSERT_EQ(p.owner(x), r) << "n=" << n << " e=" << e << " expert " << x;
      }
      EXPECT_EQ(total, e);
    }
  }
}

TEST(MoeLayout, ReceiveRowsStayBelowThePaperBound) {
  // N*T*min(R, L) rows (plus alignment padding) <= N*T*max(R, E/N).
  auto c = base();
  c.world_size = 8;
  c.num_experts = 256;
  c.top_k = 8;
  c.max_tokens_per_rank = 128;
  const auto l = arena_layout(c, 0);
  EXPECT_EQ(l.recv_rows, 8u * 128 * 8);
  EXPECT_LE(l.recv_rows, 8u * 128 * std::max(8u, 256u / 8));
  c.num_experts = 16;  // 2 experts per rank: min(R, L) = 2
  EXPECT_EQ(arena_layout(c, 0).recv_rows, 8u * 128 * 2);
  // Slots are payload + scales rounded to 16 bytes, for any hidden size.
  c.hidden = 7169;
  c.dispatch_element_bytes = 1;
  c.num_scales = 57;
  EXPECT_EQ(arena_layout(c, 0).slot_bytes, align_up(7169 + 57 * 4, 16));
}

TEST(MoePlan, BadTopkEntriesAreRejectedNamingTokenAndValue) {
  auto c = base();
  std::vector<std::int32_t> topk = {0, 1, 2, 3, 4, 10};
  auto plan = plan_routes(c, 1, topk, 2, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("topk_idx[1][2] = 10"), std::string::npos)
      << plan.status().to_string();
  topk = {0, 1, 0};
  plan = plan_routes(c, 1, topk, 1, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("twice"), std::string::npos);
  plan = plan_routes(c, 1, topk, 9, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Errc::invalid_argument);
}

TEST(MoePlan, EachTokenGoesOnceToEachRankAndCombineRowsAreByRankThenTokenThenK) {
  auto c = base();  // 4 ranks, 10 experts: ranks host {0,1}, {2,3,4}, {5,6}, {7,8,9}
  // token 0 -> experts 0, 1 (both rank 0) and 9 (rank 3); token 1 -> 5 (rank 2), -1, 2 (rank 1)
  std::vector<std::int32_t> topk = {0, 1, 9, 5, -1, 2};
  auto plan = plan_routes(c, 1, topk, 2, {});
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->count, (std::vector<std::uint32_t>{1, 1, 1, 1}));  // token 0 once to rank 0
  EXPECT_EQ(plan->rows_from, (std::vector<std::uint32_t>{2, 1, 1, 1}));  // but two rows back
  EXPECT_EQ(plan->combine_row, (std::vector<std::int32_t>{0, 1, 4, 3, -1, 2}));
}

}  // namespace
}  // namespace fabric::moe
