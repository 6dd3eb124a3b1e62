#pragma once
// A small model in both layouts, shaped like the real ones: 4 trainer ranks
// (FSDP-sharded dense parameters, EP-sharded experts: two mesh groups) and 2
// inference ranks (TP for dense, EP for experts) with fused qkv / gate_up /
// w13, a transposed lm_head, and FP8 targets with block and per-channel scales.

#include <string>

#include "fabric/weights/planner.hpp"

namespace fabric::weights::testing {

inline std::string small_model_json() {
  return R"json({
  "trainer": {
    "mesh": [["dp", 4]],
    "groups": [{"name": "dense", "unshard": ["dp"]}, {"name": "experts", "unshard": []}],
    "params": [
      {"name": "q", "shape": [512, 256], "dtype": "bfloat16", "placements": ["S(0)"], "group": "dense"},
      {"name": "k", "shape": [256, 256], "dtype": "bfloat16", "placements": ["S(0)"], "group": "dense"},
      {"name": "v", "shape": [256, 256], "dtype": "bfloat16", "placements": ["S(0)"], "group": "dense"},
      {"name": "o", "shape": [256, 512], "dtype": "bfloat16", "placements": ["S(0)"], "group": "dense"},
      {"name": "gate", "shape": [384, 256], "dtype": "bfloat16", "placements": ["S(0)"], "group": "dense"},
      {"name": "up", "shape": [384, 256], "dtype": "bfloat16", "placements": ["S(0)"], "group": "dense"},
      {"name": "norm", "shape": [256], "dtype": "float32", "placements": ["S(0)"], "group": "dense"},
      {"name": "head_t", "shape": [256, 1000], "dtype": "bfloat16", "placements": ["S(1)"], "group": "dense"},
      {"name": "w1", "shape": [8, 256, 256], "dtype": "bfloat16", "placements": ["S(0)"], "group": "experts"},
      {"name": "w3", "shape": [8, 256, 256], "dtype": "bfloat16", "placements": ["S(0)"], "group": "experts"},
      {"name": "w2", "shape": [8, 256, 256], "dtype": "bfloat16", "placements": ["S(0)"], "group": "experts"}
    ]
  },
  "inference": {
    "mesh": [["tp", 2]],
    "params": [
      {"name": "qkv", "shape": [1024, 256], "dtype": "float8_e4m3fn", "quant": "block128", "placements": ["S(0)"]},
      {"name": "o_proj", "shape": [256, 512], "dtype": "float8_e4m3fn", "quant": "per_channel", "placements": ["S(1)"]},
      {"name": "gate_up", "shape": [768, 256], "dtype": "bfloat16", "placements": ["S(0)"]},
      {"name": "norm", "shape": [256], "dtype": "bfloat16", "placements": ["R"]},
      {"name": "lm_head", "shape": [1000, 256], "dtype": "bfloat16", "placements": ["S(0)"]},
      {"name": "w13", "shape": [8, 512, 256], "dtype": "float8_e4m3fn", "quant": "block128", "placements": ["S(0)"]},
      {"name": "w2", "shape": [8, 256, 256], "dtype": "float8_e4m3fn", "quant": "per_channel", "placements": ["S(0)"]}
    ]
  },
  "rules": [
    {"target": "qkv", "sources": ["q", "k", "v"]},
    {"target": "o_proj", "sources": ["o"]},
    {"target": "gate_up", "sources": ["gate", "up"]},
    {"target": "norm", "sources": ["norm"]},
    {"target": "lm_head", "sources": ["head_t"], "transpose": true},
    {"target": "w13", "sources": ["w1", "w3"], "fuse_dim": 1},
    {"target": "w2", "sources": ["w2"]}
  ]
})json";
}

inline PlanInput small_model() { return *parse_plan_input(small_model_json()); }

}  // namespace fabric::weights::testing
