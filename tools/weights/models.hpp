#pragma once
// Parameter lists of public MoE models, built from their published configs
// (layer counts, widths, expert counts), laid out as the paper's setup: trainer
// mesh pp x ep x fsdp (BF16), inference mesh dp x ep (FP8 block-128 linear
// weights, BF16 embeddings, norms and routers; attention replicated, experts EP).

#include <string>
#include <vector>

#include "fabric/weights/planner.hpp"

namespace fabric::weights::models {

struct ModelConfig {
  std::string name;
  std::int64_t hidden = 0, layers = 0, first_dense = 0, dense_inter = 0, moe_inter = 0;
  std::int64_t experts = 0, shared_experts = 0, vocab = 0;
  bool mla = true;
  // MLA (DeepSeek-V3 family)
  std::int64_t heads = 0, q_lora = 0, kv_lora = 0, nope = 0, rope = 0, v_head = 0;
  // GQA (Qwen3)
  std::int64_t kv_heads = 0, head_dim = 0;
  bool router_bias = false;
};

[[nodiscard]] std::vector<ModelConfig> known_models();

struct Cluster {
  std::uint32_t pp = 2, train_ep = 8, fsdp = 16;
  std::uint32_t dp = 4, infer_ep = 32;
};

[[nodiscard]] PlanInput build(const ModelConfig& m, const Cluster& c);

}  // namespace fabric::weights::models
