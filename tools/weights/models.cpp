#include "models.hpp"

#include <fmt/format.h>

namespace fabric::weights::models {

std::vector<ModelConfig> known_models() {
  std::vector<ModelConfig> out;
  // moonshotai/Kimi-K2-Instruct config.json (DeepSeek-V3 architecture, 384 experts).
  ModelConfig kimi{"Kimi-K2", 7168, 61, 1, 18432, 2048, 384, 1, 163840, true, 64, 1536, 512, 128, 64, 128, 0, 0, true};
  // deepseek-ai/DeepSeek-V3 config.json.
  ModelConfig dsv3{"DeepSeek-V3", 7168, 61, 3, 18432, 2048, 256, 1, 129280, true, 128, 1536, 512, 128, 64, 128, 0, 0, true};
  // Qwen/Qwen3-235B-A22B config.json: GQA 64/4 heads of 128, every layer MoE, no shared expert.
  ModelConfig qwen{"Qwen3-235B", 4096, 94, 0, 12288, 1536, 128, 0, 151936, false, 64, 0, 0, 0, 0, 0, 4, 128, false};
  out.push_back(kimi);
  out.push_back(dsv3);
  out.push_back(qwen);
  return out;
}

namespace {

struct Builder {
  PlanInput in;
  const Cluster& c;

  explicit Builder(const Cluster& cl) : c(cl) {
    in.trainer.mesh.dims = {{"pp", c.pp}, {"ep", c.train_ep}, {"fsdp", c.fsdp}};
    in.trainer.groups = {{"dense", {false, true, true}}, {"experts", {false, false, true}}};
    in.inference.mesh.dims = {{"dp", c.dp}, {"ep", c.infer_ep}};
  }

  void source(const std::string& name, Shape shape, std::uint32_t stage, bool expert) {
    in.trainer.params.push_back({name, std::move(shape), DType::bf16,
                                 {Placement::only(static_cast<std::int32_t>(stage)), Placement::shard(0), Placement::shard(0)},
                                 expert ? 1u : 0u});
  }
  // A target from sources; FP8 block-128 unless bf16.
  void target(const std::string& name, Shape shape, std::vector<std::string> sources, bool fp8, bool expert,
              std::int32_t fuse_dim = 0) {
    TargetParam t{name, std::move(shape), fp8 ? DType::fp8_e4m3 : DType::bf16,
                  fp8 ? Quant::fp8_block128 : Quant::none,
                  {Placement::replicate(), expert ? Placement::shard(0) : Placement::replicate()}};
    in.inference.params.push_back(std::move(t));
    in.rules.push_back({name, std::move(sources), fuse_dim, false});
  }
  // One source, one target of the same name and shape.
  void same(const std::string& name, Shape shape, std::uint32_t stage, bool fp8, bool expert = false) {
    source(name, shape, stage, expert);
    target(name, shape, {name}, fp8, expert);
  }
};

}  // namespace

PlanInput build(const ModelConfig& m, const Cluster& c) {
  Builder b(c);
  const std::int64_t H = m.hidden;
  auto stage_of = [&](std::int64_t layer) { return static_cast<std::uint32_t>(layer * c.pp / m.layers); };
  b.same("embed_tokens", {m.vocab, H}, 0, false);
  for (std::int64_t l = 0; l < m.layers; ++l) {
    const auto s = stage_of(l);
    const std::string p = fmt::format("layers.{}.", l);
    b.same(p + "input_layernorm", {H}, s, false);
    b.same(p + "post_attention_layernorm", {H}, s, false);
    if (m.mla) {
      b.source(p + "q_a_proj", {m.q_lora, H}, s, false);
      b.source(p + "kv_a_proj_with_mqa", {m.kv_lora + m.rope, H}, s, false);
      b.target(p + "fused_qkv_a_proj", {m.q_lora + m.kv_lora + m.rope, H},
               {p + "q_a_proj", p + "kv_a_proj_with_mqa"}, true, false);
      b.same(p + "q_a_layernorm", {m.q_lora}, s, false);
      b.same(p + "kv_a_layernorm", {m.kv_lora}, s, false);
      b.same(p + "q_b_proj", {m.heads * (m.nope + m.rope), m.q_lora}, s, true);
      b.same(p + "kv_b_proj", {m.heads * (m.nope + m.v_head), m.kv_lora}, s, true);
      b.same(p + "o_proj", {H, m.heads * m.v_head}, s, true);
    } else {
      b.source(p + "q_proj", {m.heads * m.head_dim, H}, s, false);
      b.source(p + "k_proj", {m.kv_heads * m.head_dim, H}, s, false);
      b.source(p + "v_proj", {m.kv_heads * m.head_dim, H}, s, false);
      b.target(p + "qkv_proj", {(m.heads + 2 * m.kv_heads) * m.head_dim, H},
               {p + "q_proj", p + "k_proj", p + "v_proj"}, true, false);
      b.same(p + "o_proj", {H, m.heads * m.head_dim}, s, true);
      b.same(p + "q_norm", {m.head_dim}, s, false);
      b.same(p + "k_norm", {m.head_dim}, s, false);
    }
    auto gate_up = [&](const std::string& q, std::int64_t inter) {
      b.source(q + "gate_proj", {inter, H}, s, false);
      b.source(q + "up_proj", {inter, H}, s, false);
      b.target(q + "gate_up_proj", {2 * inter, H}, {q + "gate_proj", q + "up_proj"}, true, false);
      b.same(q + "down_proj", {H, inter}, s, true);
    };
    if (l < m.first_dense) {
      gate_up(p + "mlp.", m.dense_inter);
      continue;
    }
    b.same(p + "mlp.gate", {m.experts, H}, s, false);
    if (m.router_bias) b.same(p + "mlp.gate.e_score_correction_bias", {m.experts}, s, false);
    if (m.shared_experts) gate_up(p + "mlp.shared_experts.", m.moe_inter * m.shared_experts);
    const std::string e = p + "mlp.experts.";
    b.source(e + "w1", {m.experts, m.moe_inter, H}, s, true);
    b.source(e + "w3", {m.experts, m.moe_inter, H}, s, true);
    b.target(e + "w13_weight", {m.experts, 2 * m.moe_inter, H}, {e + "w1", e + "w3"}, true, true, 1);
    b.source(e + "w2", {m.experts, H, m.moe_inter}, s, true);
    b.target(e + "w2_weight", {m.experts, H, m.moe_inter}, {e + "w2"}, true, true);
  }
  b.same("norm", {H}, c.pp - 1, false);
  b.same("lm_head", {m.vocab, H}, c.pp - 1, false);
  return std::move(b.in);
}

}  // namespace fabric::weights::models
