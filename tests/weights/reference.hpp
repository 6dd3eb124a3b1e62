#pragma once
// The single-process reference: every inference rank's arena assembled by
// preparing every write of a schedule from whole (unsharded) source tensors.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fabric/weights/executor.hpp"
#include "fabric/weights/fp8.hpp"
#include "fabric/weights/planner.hpp"

namespace fabric::weights {

struct Globals {
  std::map<std::string, std::vector<std::byte>> bytes;
  std::map<std::string, std::vector<float>> values;
};

inline Globals make_globals(const PlanInput& in, int seed) {
  Globals g;
  for (const auto& p : in.trainer.params) {
    std::int64_t n = 1;
    for (auto e : p.shape) n *= e;
    auto& v = g.values[p.name];
    auto& b = g.bytes[p.name];
    b.resize(n * dtype_size(p.dtype));
    for (std::int64_t i = 0; i < n; ++i) {
      float x = std::sin(static_cast<float>(i * 7 + seed + p.name.size())) * (1.0f + (i % 5));
      if (p.dtype == DType::bf16) {
        std::uint16_t h = float_to_bf16(x);
        std::memcpy(b.data() + i * 2, &h, 2);
        x = bf16_to_float(h);
      } else {
        std::memcpy(b.data() + i * 4, &x, 4);
      }
      v.push_back(x);
    }
  }
  return g;
}

// Each inference rank's arena, assembled from every write of the schedule.
inline std::vector<std::vector<std::byte>> assemble(const PlanInput& in, const Schedule& s, const Globals& g) {
  std::vector<std::vector<std::byte>> arenas;
  for (auto n : s.arena_bytes) arenas.emplace_back(n);
  std::map<std::string, SourceView> views;
  for (const auto& p : in.trainer.params) {
    Box full{Shape(p.shape.size(), 0), p.shape};
    views[p.name] = SourceView{p.name, g.bytes.at(p.name).data(), p.dtype, full};
  }
  for (const auto& op : s.writes) {
    const Chunk& c = s.chunks[op.chunk];
    const auto& t = s.targets[s.images[c.image].target];
    std::vector<const SourceView*> parts;
    for (const auto& src : t.sources) parts.push_back(&views.at(src));
    std::vector<std::byte> data(c.bytes), scales(c.scale_bytes);
    auto st = prepare_chunk(s, c, parts, data, scales);
    EXPECT_TRUE(st.ok()) << st.to_string();
    const auto& src = op.scale ? scales : data;
    std::memcpy(arenas[op.inference].data() + op.dst_offset, src.data(), op.length);
  }
  return arenas;
}

}  // namespace fabric::weights
