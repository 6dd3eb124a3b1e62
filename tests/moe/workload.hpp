#pragma once
// Test workloads: every rank regenerates any dp group's tokens and routing of
// any iteration from seeds, so each checks its results against a dense,
// single-process reference without receiving anything but the results.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fabric/moe/config.hpp"

namespace fabric::moe::test {

enum class Routing {
  uniform,    // top_k distinct experts drawn uniformly, every token
  skewed,     // every token to experts 0..top_k-1 (all load on the first ranks)
  single,     // every token to expert 0 only, the other k are -1
  empty_rank, // rank (iteration mod N) gets nothing, and dp group (iteration mod G) sends nothing
  random,     // random token counts (0..T), some -1 entries, random experts
};
[[nodiscard]] std::string routing_name(Routing routing);

struct GroupInput {
  std::uint32_t tokens = 0;
  std::vector<std::byte> x;        // [tokens][hidden * dispatch_element_bytes]
  std::vector<float> scales;       // [tokens][num_scales]
  std::vector<std::int32_t> topk;  // [tokens][top_k]
  std::vector<float> weights;      // [tokens][top_k]
};

// dp group `group`'s input at `iteration` (identical on all its members).
[[nodiscard]] GroupInput make_input(const MoeConfig& config, Routing routing, std::uint64_t seed,
                                    std::uint32_t iteration, std::uint32_t group);

// The expert's computation on one dispatched token: a function of the expert
// and the token's bytes and scales only, written as combine_input.
void expert_forward(const MoeConfig& config, std::uint32_t expert, const std::byte* token,
                    const float* scales, std::byte* out_row);

struct ExpectedDispatch {
  std::vector<std::uint32_t> count;   // per local expert
  std::vector<std::byte> rows;        // per local expert, its rows back to back (token bytes)
  std::vector<float> scales;
  std::vector<std::uint32_t> first;   // per local expert: index of its first row in `rows`
};
// What `rank` must receive: per local expert, tokens in (source rank, token) order.
[[nodiscard]] ExpectedDispatch expected_dispatch(const MoeConfig& config, Routing routing,
                                                 std::uint64_t seed, std::uint32_t iteration,
                                                 std::uint32_t rank);

// The combine result of `input` in FP32, summing k in order (combine_output).
[[nodiscard]] std::vector<std::byte> expected_combine(const MoeConfig& config,
                                                      const GroupInput& input);

}  // namespace fabric::moe::test
