// Single-process checks of the pure parts: config validation, expert
// placement, buffer sizing and the routes plan's input checks.
#include <gtest/gtest.h>

#include <algorithm>
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

namespace fabric::moe {
namespace {

// Rank 0's arena with the routes of both ranks of a 2-rank group in its
// private regions, as the routes WRITEs (and the local copy) leave them.
struct TwoRankRoutes {
  MoeConfig c0, c1;
  std::vector<std::byte> arena0, arena1;
  std::uint64_t header1 = 0;  // where source 1's header landed in arena0
  TwoRankRoutes() {
    c0 = base();
    c0.world_size = 2;
    c0.num_experts = 4;  // rank 0 hosts 0 and 1
    c1 = c0;
    c1.rank = 1;
    arena0.resize(arena_layout(c0, 0).total_bytes);
    arena1.resize(arena_layout(c1, 1).total_bytes);
    const std::vector<std::int32_t> topk0 = {0, 2, -1, 1, 3, -1};  // 2 tokens of rank 0
    const std::vector<std::int32_t> topk1 = {1, 0, 3, 2, 3, -1};   // 2 tokens of rank 1
    const auto p0 = plan_routes(c0, 7, topk0, 2, arena0).value();
    const auto p1 = plan_routes(c1, 7, topk1, 2, arena1).value();
    const auto l = arena_layout(c0, 0);
    const auto place = [&](const SendPlan& p, const std::vector<std::byte>& from, std::uint32_t s) {
      const std::uint64_t len = p.list_bytes[0] + l.header_bytes;
      std::copy_n(from.begin() + (p.header[0] - p.list_bytes[0]), len,
                  arena0.begin() + (l.header_offset(s) - p.list_bytes[0]));
    };
    place(p0, arena0, 0);
    place(p1, arena1, 1);
    header1 = l.header_offset(1);
  }
  RouteHeader& h1() { return *reinterpret_cast<RouteHeader*>(arena0.data() + header1); }
};

TEST(MoePlan, TheReceivePlanGroupsRowsByExpertThenSourceThenToken) {
  TwoRankRoutes r;
  auto plan = plan_receive(r.c0, 7, r.arena0);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  // Expert 0: (rank 0, token 0), (rank 1, token 0); expert 1: (rank 0, token 1), (rank 1, token 0).
  EXPECT_EQ(plan->expert_count, (std::vector<std::uint32_t>{2, 2}));
  EXPECT_EQ(plan->tokens_from, (std::vector<std::uint32_t>{2, 1}));
  EXPECT_EQ(plan->row_slot, (std::vector<std::uint32_t>{0, 2, 1, 2}));
  // Combine gather: source 0 (token 0 k0, token 1 k1), then source 1 (token 0: k0, k1).
  EXPECT_EQ(plan->gather_row, (std::vector<std::uint32_t>{0, 2, 3, 1}));
}

TEST(MoePlan, StaleOrInconsistentRoutesAreMalformedNamingTheSource) {
  {
    TwoRankRoutes r;
    r.h1().epoch = 6;
    auto plan = plan_receive(r.c0, 7, r.arena0);
    ASSERT_EQ(plan.status().code(), Errc::malformed);
    EXPECT_NE(plan.status().message().find("from rank 1"), std::string::npos) << plan.status().to_string();
    EXPECT_NE(plan.status().message().find("stale"), std::string::npos);
  }
  {
    TwoRankRoutes r;
    r.h1().combine_rows += 1;
    EXPECT_EQ(plan_receive(r.c0, 7, r.arena0).status().code(), Errc::malformed);
  }
  {
    TwoRankRoutes r;
    r.h1().magic = 0;
    EXPECT_EQ(plan_receive(r.c0, 7, r.arena0).status().code(), Errc::malformed);
  }
  {
    TwoRankRoutes r;
    r.h1().tokens = 99;
    EXPECT_EQ(plan_receive(r.c0, 7, r.arena0).status().code(), Errc::malformed);
  }
}

}  // namespace
}  // namespace fabric::moe
