#include "workload.hpp"

#include <algorithm>
#include <cstring>

#include "fabric/moe/host_device.hpp"
#include "fabric/moe/layout.hpp"
#include "fabric_test/data.hpp"

namespace fabric::moe::test {

namespace {

std::uint64_t seed_of(std::uint64_t seed, std::uint32_t iteration, std::uint32_t group) {
  std::uint64_t s = seed ^ (std::uint64_t{iteration} << 20) ^ (std::uint64_t{group} << 48);
  fabric::test::splitmix64(s);
  return s;
}

std::uint32_t below(std::uint64_t& state, std::uint32_t n) {
  return static_cast<std::uint32_t>(fabric::test::splitmix64(state) % n);
}

float unit(std::uint64_t& state) {  // in [-1, 1), exactly representable in bf16 steps
  return static_cast<float>(static_cast<std::int32_t>(below(state, 256)) - 128) / 128.0f;
}

}  // namespace

std::string routing_name(Routing r) {
  switch (r) {
    case Routing::uniform: return "uniform";
    case Routing::skewed: return "skewed";
    case Routing::single: return "single";
    case Routing::empty_rank: return "empty_rank";
    case Routing::random: return "random";
  }
  return "?";
}

GroupInput make_input(const MoeConfig& c, Routing routing, std::uint64_t seed,
                      std::uint32_t iteration, std::uint32_t group) {
  std::uint64_t st = seed_of(seed, iteration, group);
  const Placement placement(c);
  const std::uint32_t r = c.top_k;
  GroupInput in;
  in.tokens = c.max_tokens_per_rank;
  if (routing == Routing::random) in.tokens = below(st, c.max_tokens_per_rank + 1);
  if (routing == Routing::empty_rank && group == iteration % placement.num_dp_groups()) in.tokens = 0;
  const std::size_t tb = token_bytes(c);
  in.x.resize(in.tokens * tb);
  for (std::size_t i = 0; i < in.x.size(); i += c.dispatch_element_bytes) {
    if (c.dispatch_element_bytes == 2) {
      const std::uint16_t v = float_to_bf16(unit(st));
      std::memcpy(in.x.data() + i, &v, 2);
    } else if (c.dispatch_element_bytes == 4) {
      const float v = unit(st);
      std::memcpy(in.x.data() + i, &v, 4);
    } else {
      in.x[i] = static_cast<std::byte>(fabric::test::splitmix64(st));
    }
  }
  in.scales.resize(std::size_t{in.tokens} * c.num_scales);
  for (auto& s : in.scales) s = 1.0f + static_cast<float>(below(st, 16)) / 16.0f;
  in.topk.assign(std::size_t{in.tokens} * r, -1);
  in.weights.assign(std::size_t{in.tokens} * r, 0.0f);
  const std::uint32_t empty = iteration % c.world_size;
  for (std::uint32_t t = 0; t < in.tokens; ++t) {
    std::vector<std::int32_t> chosen;
    for (std::uint32_t k = 0; k < r; ++k) {
      std::int32_t e = -1;
      switch (routing) {
        case Routing::skewed: e = k < c.num_experts ? static_cast<std::int32_t>(k) : -1; break;
        case Routing::single: e = k == 0 ? 0 : -1; break;
        case Routing::uniform:
        case Routing::empty_rank:
        case Routing::random: {
          if (routing == Routing::random && below(st, 8) == 0) break;  // a -1 now and then
          for (int attempt = 0; attempt < 64; ++attempt) {
            const auto cand = static_cast<std::int32_t>(below(st, c.num_experts));
            if (routing == Routing::empty_rank && placement.owner(static_cast<std::uint32_t>(cand)) == empty &&
                c.world_size > 1)
              continue;
            if (std::find(chosen.begin(), chosen.end(), cand) != chosen.end()) continue;
            e = cand;
            break;
          }
          break;
        }
      }
      if (e >= 0) chosen.push_back(e);
      in.topk[std::size_t{t} * r + k] = e;
      in.weights[std::size_t{t} * r + k] = e >= 0 ? unit(st) : 0.0f;
    }
  }
  return in;
}

void expert_forward(const MoeConfig& c, std::uint32_t expert, const std::byte* token,
                    const float* scales, std::byte* out_row) {
  // y = value * (1 + expert / 8) + scale, elementwise; exact enough to be
  // distinct per expert and token, and cheap.
  const float gain = 1.0f + static_cast<float>(expert % 64) / 8.0f;
  for (std::uint32_t h = 0; h < c.hidden; ++h) {
    float v = 0;
    if (c.dispatch_element_bytes == 2) {
      std::uint16_t b;
      std::memcpy(&b, token + 2 * h, 2);
      v = bf16_to_float(b);
    } else if (c.dispatch_element_bytes == 4) {
      std::memcpy(&v, token + 4 * h, 4);
    } else {
      v = static_cast<float>(static_cast<std::int8_t>(token[h])) / 64.0f;
    }
    if (c.num_scales > 0) v = v * scales[h % c.num_scales];
    const float y = v * gain;
    if (c.combine_input == ElementType::bf16) {
      const std::uint16_t b = float_to_bf16(y);
      std::memcpy(out_row + 2 * h, &b, 2);
    } else {
      std::memcpy(out_row + 4 * h, &y, 4);
    }
  }
}

ExpectedDispatch expected_dispatch(const MoeConfig& c, Routing routing, std::uint64_t seed,
                                   std::uint32_t iteration, std::uint32_t rank) {
  const Placement placement(c);
  const std::uint32_t local = placement.local_experts(rank);
  const std::uint32_t first_expert = placement.first_expert(rank);
  const std::size_t tb = token_bytes(c);
  std::vector<GroupInput> groups;
  for (std::uint32_t g = 0; g < placement.num_dp_groups(); ++g)
    groups.push_back(make_input(c, routing, seed, iteration, g));
  ExpectedDispatch out;
  out.count.assign(local, 0);
  out.first.assign(local, 0);
  for (std::uint32_t e = 0; e < local; ++e) {
    out.first[e] = static_cast<std::uint32_t>(out.rows.size() / std::max<std::size_t>(tb, 1));
    for (std::uint32_t s = 0; s < c.world_size; ++s) {
      const auto& in = groups[placement.dp_group(s)];
      const auto chunk = token_chunk(in.tokens, c.dp_size, placement.dp_rank(s));
      for (std::uint32_t t = chunk.begin; t < chunk.end; ++t) {
        bool hit = false;
        for (std::uint32_t k = 0; k < c.top_k; ++k)
          hit |= in.topk[std::size_t{t} * c.top_k + k] == static_cast<std::int32_t>(first_expert + e);
        if (!hit) continue;
        ++out.count[e];
        out.rows.insert(out.rows.end(), in.x.begin() + t * tb, in.x.begin() + (t + 1) * tb);
        out.scales.insert(out.scales.end(), in.scales.begin() + std::size_t{t} * c.num_scales,
                          in.scales.begin() + std::size_t{t + 1} * c.num_scales);
      }
    }
  }
  return out;
}

std::vector<std::byte> expected_combine(const MoeConfig& c, const GroupInput& in) {
  const std::size_t h = c.hidden;
  const std::size_t tb = token_bytes(c);
  const std::size_t ob = element_bytes(c.combine_output);
  std::vector<std::byte> out(in.tokens * h * ob);
  std::vector<std::byte> row(h * element_bytes(c.combine_input));
  std::vector<float> acc(h);
  for (std::uint32_t t = 0; t < in.tokens; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (std::uint32_t k = 0; k < c.top_k; ++k) {
      const std::int32_t e = in.topk[std::size_t{t} * c.top_k + k];
      if (e < 0) continue;
      expert_forward(c, static_cast<std::uint32_t>(e), in.x.data() + t * tb,
                     in.scales.data() + std::size_t{t} * c.num_scales, row.data());
      const float w = in.weights[std::size_t{t} * c.top_k + k];
      for (std::size_t i = 0; i < h; ++i) {
        float v;
        if (c.combine_input == ElementType::bf16) {
          std::uint16_t b;
          std::memcpy(&b, row.data() + 2 * i, 2);
          v = bf16_to_float(b);
        } else {
          std::memcpy(&v, row.data() + 4 * i, 4);
        }
        acc[i] = acc[i] + w * v;
      }
    }
    for (std::size_t i = 0; i < h; ++i) {
      std::byte* o = out.data() + (t * h + i) * ob;
      if (c.combine_output == ElementType::bf16) {
        const std::uint16_t b = float_to_bf16(acc[i]);
        std::memcpy(o, &b, 2);
      } else {
        std::memcpy(o, &acc[i], 4);
      }
    }
  }
  return out;
}

}  // namespace fabric::moe::test
