// Multi-process dispatch/combine over the engine on the host device: every
// rank checks its dispatch output and its combine result byte for byte
// against the dense single-process reference, for every routing, world size,
// dp and node layout below.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "fabric_test/env.hpp"
#include "ranks.hpp"
#include "scenario.hpp"

namespace fabric::moe::test {
namespace {

struct Case {
  std::string name;
  std::uint32_t world;
  std::uint32_t experts;
  std::uint32_t hidden;
  std::uint32_t top_k;
  std::uint32_t tokens;
  std::uint32_t private_tokens;
  std::uint32_t dp = 1;
  std::uint32_t node = 1;
  Routing routing = Routing::uniform;
  std::uint32_t iterations = 20;
  std::uint32_t element_bytes = 2;
  std::uint32_t scales = 0;
  ElementType combine_in = ElementType::bf16;
  ElementType combine_out = ElementType::f32;
  std::uint32_t alignment = 1;
  ProxyMode proxy = ProxyMode::inline_steps;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

Scenario scenario_of(const Case& c) {
  Scenario sc;
  auto& m = sc.config;
  m.world_size = c.world;
  m.num_experts = c.experts;
  m.hidden = c.hidden;
  m.top_k = c.top_k;
  m.max_tokens_per_rank = c.tokens;
  m.max_private_tokens = c.private_tokens;
  m.dp_size = c.dp;
  m.node_size = c.node;
  m.dispatch_element_bytes = c.element_bytes;
  m.num_scales = c.scales;
  m.combine_input = c.combine_in;
  m.combine_output = c.combine_out;
  m.expert_alignment = c.alignment;
  m.timeout = std::chrono::milliseconds(20000);
  sc.routing = c.routing;
  sc.proxy = c.proxy;
  sc.iterations = c.iterations;
  sc.seed = 0x5eed0000 + c.world * 131 + c.experts;
  return sc;
}

class MoeGroupTest : public ::testing::TestWithParam<Case> {};

TEST_P(MoeGroupTest, DispatchAndCombineEqualTheDenseReference) {
  const Case& c = GetParam();
  fabric::test::use_loopback_environment();
  const Scenario sc = scenario_of(c);
  const auto outcomes = run_ranks(
      c.world, [&](std::uint32_t rank, fabric::test::Channel& ch) { return run_scenario_rank(sc, rank, ch); },
      std::chrono::seconds(240));
  for (std::uint32_t r = 0; r < c.world; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_TRUE(outcomes[r].exit.ok()) << outcomes[r].exit.to_string() << ": " << outcomes[r].report;
    const auto& rep = outcomes[r].report;
    EXPECT_EQ(report_value(rep, "iterations"), c.iterations) << rep;
    // The protocol's write budget: routes+private and overflow for dispatch,
    // one write for combine, per inter-node peer and iteration.
    EXPECT_LE(report_value(rep, "max_dispatch_writes"), 2) << rep;
    EXPECT_LE(report_value(rep, "max_combine_writes"), 1) << rep;
    // Every immediate was expected by a plan and consumed; none left over.
    EXPECT_EQ(report_value(rep, "stray"), 0) << rep;
    // Every engine request this rank made completed: no pending-send drift.
    EXPECT_EQ(report_value(rep, "submissions"), report_value(rep, "completions")) << rep;
    if (r == 0) std::printf("[ moe ] %s rank 0: %s\n", c.name.c_str(), rep.c_str());
  }
}

const Case kCases[] = {
    // EP sizes, uniform routing; hidden sizes with odd tails; E not a multiple of N.
    {"ep2_uniform", 2, 8, 67, 4, 24, 4},
    {"ep4_uniform", 4, 16, 130, 8, 32, 8},
    {"ep8_uniform", 8, 64, 33, 8, 16, 4},
    {"ep3_odd_experts", 3, 10, 61, 3, 20, 5},
    {"ep6_uniform", 6, 13, 40, 5, 12, 3},
    // Skewed: every token to experts 0..k-1, overflowing the first rank.
    {"ep4_skewed", 4, 16, 64, 4, 32, 2, 1, 1, Routing::skewed},
    {"ep4_single_expert", 4, 8, 48, 8, 32, 4, 1, 1, Routing::single},
    // Empty ranks and empty dp groups.
    {"ep4_empty_rank", 4, 8, 32, 2, 16, 4, 1, 1, Routing::empty_rank},
    {"ep5_empty_rank", 5, 11, 32, 3, 16, 4, 1, 1, Routing::empty_rank},
    // Random token counts (including 0), -1 entries, random experts.
    {"ep4_random", 4, 12, 50, 6, 40, 6, 1, 1, Routing::random, 40},
    {"ep8_random_top16", 8, 300, 24, 16, 20, 3, 1, 1, Routing::random, 20},
    // dp groups: ranks of a group share tokens; each sends a share, all get the result.
    {"ep4_dp2", 4, 8, 40, 4, 24, 4, 2, 1, Routing::random, 20},
    {"ep8_dp4_nodes2", 8, 16, 24, 4, 32, 4, 4, 2, Routing::random, 20},
    // Nodes: direct copies between processes of an emulated node.
    {"ep4_node2", 4, 8, 40, 4, 24, 4, 1, 2, Routing::random, 20},
    {"ep6_node3_dp2", 6, 12, 24, 4, 24, 4, 2, 3, Routing::random, 20},
    {"ep4_one_node", 4, 8, 24, 4, 16, 4, 1, 4, Routing::uniform, 20},
    // FP8-style dispatch with scales, FP32 experts, BF16 output, grouped-GEMM padding.
    {"ep4_fp8_scales_bf16_out", 4, 8, 64, 4, 16, 4, 1, 2, Routing::random, 20, 1, 4,
     ElementType::bf16, ElementType::bf16, 8},
    {"ep2_f32_experts", 2, 4, 32, 2, 16, 2, 1, 1, Routing::uniform, 10, 4, 0, ElementType::f32,
     ElementType::f32, 4},
    // One rank: no peers, no scatter at all (never an empty one).
    {"ep1_single_rank", 1, 4, 16, 2, 8, 2},
    // dp > 1 across nodes over many iterations: private writes go to the token's
    // destinations only, so no surplus immediate ever carries over.
    {"ep4_dp2_across_nodes_200_iterations", 4, 8, 16, 4, 16, 2, 2, 1, Routing::random, 200},
    // 1,000 iterations of changing routings (token counts, -1s, experts) over
    // both paths (two emulated nodes of two ranks, dp pairs across them).
    {"ep4_nodes2_dp2_1000_iterations", 4, 12, 24, 4, 16, 3, 2, 2, Routing::random, 1000},
    // The proxy thread runs the engine-side steps in the background, signalled
    // directly or through a watched word (the GPU kernels' way).
    {"ep4_nodes2_proxy_thread", 4, 8, 40, 4, 24, 4, 1, 2, Routing::random, 40, 2, 0,
     ElementType::bf16, ElementType::f32, 1, ProxyMode::thread},
    {"ep4_dp2_proxy_watcher", 4, 8, 40, 4, 24, 4, 2, 1, Routing::random, 40, 2, 0,
     ElementType::bf16, ElementType::f32, 1, ProxyMode::watcher},
    {"ep8_nodes2_proxy_watcher_300_iterations", 8, 20, 24, 6, 16, 3, 1, 2, Routing::random, 300, 2, 0,
     ElementType::bf16, ElementType::f32, 1, ProxyMode::watcher},
    // More experts than 512 (no cap), private region of 0 (everything overflows).
    {"ep2_600_experts_no_private", 2, 600, 16, 8, 16, 0},
};

INSTANTIATE_TEST_SUITE_P(Routings, MoeGroupTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace fabric::moe::test
