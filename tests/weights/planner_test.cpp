#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "fabric/weights/executor.hpp"
#include "fabric/weights/fp8.hpp"
#include "fabric/weights/planner.hpp"
#include "fabric/weights/simulator.hpp"
#include "reference.hpp"
#include "small_model.hpp"

namespace fabric::weights {
namespace {

using testing::small_model;

PlannerConfig small_chunks() {
  PlannerConfig c;
  c.max_chunk_bytes = 40 << 10;  // several chunks per image
  return c;
}

TEST(Planner, EveryArenaByteIsWrittenExactlyOnce) {
  auto s = plan(small_model(), small_chunks());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  for (std::uint32_t r = 0; r < s->inference_ranks; ++r) {
    std::vector<int> hits(s->arena_bytes[r], 0);
    for (const auto& op : s->writes) {
      if (op.inference != r) continue;
      ASSERT_LE(op.dst_offset + op.length, hits.size());
      for (std::uint64_t i = 0; i < op.length; ++i) ++hits[op.dst_offset + i];
    }
    for (const auto& e : s->arenas[r]) {
      for (std::uint64_t i = 0; i < e.bytes; ++i) ASSERT_EQ(hits[e.offset + i], 1) << s->targets[e.target].name;
      for (std::uint64_t i = 0; i < e.scale_bytes; ++i) ASSERT_EQ(hits[e.scale_offset + i], 1);
    }
  }
}

TEST(Planner, IsDeterministicAndRoundTripsThroughJson) {
  auto a = plan(small_model(), small_chunks());
  auto b = plan(small_model(), small_chunks());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->to_json(), b->to_json());
  auto back = Schedule::from_json(a->to_json());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->to_json(), a->to_json());
  EXPECT_EQ(Schedule::from_json("{\"format\": 1}").status().code(), Errc::malformed);
  EXPECT_EQ(Schedule::from_json("not json").status().code(), Errc::malformed);
}

TEST(Planner, GroupsRunInOrderAndExpertsComeFromTheirOwners) {
  auto s = plan(small_model(), small_chunks());
  ASSERT_TRUE(s.ok());
  std::uint32_t last_group = 0;
  for (const auto& op : s->writes) {
    EXPECT_GE(op.group, last_group);
    last_group = op.group;
    const auto& t = s->targets[s->images[s->chunks[op.chunk].image].target];
    EXPECT_EQ(op.group, t.mesh_group);
    if (t.name == "w2") {
      // Trainer rank k holds experts [2k, 2k+2): a chunk's experts come from their owner.
      const auto& c = s->chunks[op.chunk];
      const auto& box = s->images[c.image].part_boxes[0];
      EXPECT_EQ((box.lo[0] + c.row_lo) / 2, op.trainer);
      EXPECT_EQ((box.lo[0] + c.row_hi - 1) / 2, op.trainer);
    }
  }
}

TEST(Planner, BalancesTrainerNicsAndCountsImmediates) {
  auto s = plan(small_model(), small_chunks());
  ASSERT_TRUE(s.ok());
  std::vector<std::uint64_t> out(s->trainer_ranks, 0);
  std::vector<std::uint64_t> imms(s->inference_ranks, s->trainer_ranks);
  for (const auto& op : s->writes) {
    out[op.trainer] += op.length;
    ++imms[op.inference];
  }
  auto [mn, mx] = std::minmax_element(out.begin(), out.end());
  EXPECT_LT(static_cast<double>(*mx), 1.3 * static_cast<double>(*mn));
  EXPECT_EQ(imms, s->expected_imms);
  EXPECT_GT(s->prediction.bound_s, 0);
  EXPECT_DOUBLE_EQ(s->prediction.bound_s,
                   static_cast<double>(std::max(s->prediction.max_nic_in_bytes, s->prediction.max_nic_out_bytes)) /
                       s->prediction.nic_bytes_per_s);
}

void expect_refused(PlanInput in, const std::string& needle) {
  auto s = plan(in);
  ASSERT_FALSE(s.ok()) << "accepted, expected: " << needle;
  EXPECT_EQ(s.status().code(), Errc::invalid_argument);
  EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status().message();
}

TEST(Planner, RefusesBadMetadataNamingTheParameter) {
  {
    auto in = small_model();
    in.trainer.params[0].shape = {500, 256};  // q no longer fuses into qkv's 1024 rows
    expect_refused(in, "target 'qkv' has shape [1024, 256] but its sources make [1012, 256]");
  }
  {
    auto in = small_model();
    in.trainer.params.push_back({"stray", {4}, DType::bf16, {Placement::replicate()}, 0});
    expect_refused(in, "trainer parameter 'stray' has no target");
  }
  {
    auto in = small_model();
    in.rules.erase(in.rules.begin() + 3);  // norm
    expect_refused(in, "inference parameter 'norm' has no source");
  }
  {
    auto in = small_model();
    in.rules[0].sources[1] = "kk";
    expect_refused(in, "source 'kk' is not a trainer parameter");
  }
  {
    auto in = small_model();
    in.inference.mesh.dims[0].size = 4;  // k's 256 rows / 4 = 64: not whole 128-blocks
    expect_refused(in, "not on a 128-block");
  }
  {
    auto in = small_model();
    in.inference.params[0].placements = {Placement::shard(2)};
    expect_refused(in, "Shard(2)");
  }
  {
    auto in = small_model();
    in.inference.params[3].dtype = DType::fp8_e4m3;  // fp8 without a quantization
    expect_refused(in, "'norm'");
  }
  EXPECT_FALSE(parse_plan_input("{\"trainer\": 3}").ok());
}

std::uint16_t bf16_at(const std::vector<std::byte>& a, std::uint64_t off) {
  std::uint16_t h;
  std::memcpy(&h, a.data() + off, 2);
  return h;
}

TEST(Prepare, BuildsFusedTransposedAndCastTargetsExactly) {
  auto in = small_model();
  auto s = plan(in, small_chunks());
  ASSERT_TRUE(s.ok());
  auto g = make_globals(in, 1);
  auto arenas = assemble(in, *s, g);
  auto entry = [&](std::uint32_t r, const std::string& name) {
    for (const auto& e : s->arenas[r]) {
      if (s->targets[e.target].name == name) return e;
    }
    ADD_FAILURE() << name;
    return ArenaEntry{};
  };
  for (std::uint32_t r = 0; r < 2; ++r) {
    // gate_up: TP shards gate and up each, then stacks them: [gate rows of r; up rows of r].
    auto e = entry(r, "gate_up");
    for (std::int64_t i = 0; i < 384; ++i) {
      const auto& src = i < 192 ? g.values["gate"] : g.values["up"];
      std::int64_t row = r * 192 + (i % 192);
      for (std::int64_t j = 0; j < 256; j += 37) {
        ASSERT_EQ(bf16_at(arenas[r], e.offset + (i * 256 + j) * 2), float_to_bf16(src[row * 256 + j]));
      }
    }
    // lm_head = head_t transposed, rows [500r, 500r + 500).
    e = entry(r, "lm_head");
    for (std::int64_t i = 0; i < 500; i += 13) {
      for (std::int64_t j = 0; j < 256; ++j) {
        ASSERT_EQ(bf16_at(arenas[r], e.offset + (i * 256 + j) * 2),
                  float_to_bf16(g.values["head_t"][j * 1000 + r * 500 + i]));
      }
    }
    // norm: float32 -> bfloat16, replicated.
    e = entry(r, "norm");
    for (std::int64_t i = 0; i < 256; ++i) {
      ASSERT_EQ(bf16_at(arenas[r], e.offset + i * 2), float_to_bf16(g.values["norm"][i]));
    }
    // w13 (fp8, block scales): dequantized values are within FP8's precision of the source.
    e = entry(r, "w13");
    for (std::int64_t x = 0; x < 4; ++x) {
      for (std::int64_t i = 0; i < 512; i += 11) {
        for (std::int64_t j = 0; j < 256; j += 5) {
          std::int64_t expert = r * 4 + x;
          float want = (i < 256 ? g.values["w1"] : g.values["w3"])[(expert * 256 + i % 256) * 256 + j];
          float scale;
          std::memcpy(&scale, arenas[r].data() + e.scale_offset + ((x * 4 + i / 128) * 2 + j / 128) * 4, 4);
          float got = fp8_e4m3_to_float(static_cast<std::uint8_t>(arenas[r][e.offset + (x * 512 + i) * 256 + j])) * scale;
          ASSERT_NEAR(got, want, std::fabs(want) / 14 + scale / 256) << x << " " << i << " " << j;
        }
      }
    }
  }
}

TEST(Simulator, MeetsTheBoundWhenNothingContends) {
  auto s = plan(small_model(), small_chunks());
  ASSERT_TRUE(s.ok());
  SimConfig cfg;
  cfg.nic_bytes_per_s = 1e9;
  auto r = simulate(*s, cfg);
  EXPECT_GE(r.time_s, r.group_bound_s * 0.999);
  EXPECT_LE(r.time_s, r.group_bound_s * 1.5);
  EXPECT_GE(r.group_bound_s, r.bound_s * 0.999);
  auto b = baseline_estimate(small_model(), *s, 1e9);
  EXPECT_GT(b.time_s, r.time_s);
}

}  // namespace
}  // namespace fabric::weights
