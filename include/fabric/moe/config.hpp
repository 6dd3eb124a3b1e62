#pragma once
// What one expert-parallel group looks like: ranks, experts, token shapes and
// protocol limits. Every rank of a group must pass the same values except
// `rank`. Contract and sizing rules in docs/moe.md.

#include <chrono>
#include <cstdint>
#include <string>

#include "fabric/status.hpp"

namespace fabric::moe {

// Element type of the expert outputs that combine sums (and of its result).
enum class ElementType : std::uint8_t { bf16, f32 };

[[nodiscard]] constexpr std::uint32_t element_bytes(ElementType type) noexcept {
  return type == ElementType::bf16 ? 2 : 4;
}

inline constexpr std::uint32_t kMaxTopK = 16;
inline constexpr std::uint32_t kMaxWorldSize = 4096;

struct MoeConfig {
  std::uint32_t world_size = 1;
  std::uint32_t rank = 0;
  // Experts are spread in contiguous blocks: rank r hosts [r*E/N, (r+1)*E/N).
  std::uint32_t num_experts = 1;
  // Elements per token (any value; no tail restriction).
  std::uint32_t hidden = 1;
  // Bytes per dispatched element: 1 (FP8), 2 (BF16), 4 (FP32). Dispatch moves
  // them as opaque bytes.
  std::uint32_t dispatch_element_bytes = 2;
  // FP32 scales carried with each dispatched token (FP8 dispatch); 0 for none.
  std::uint32_t num_scales = 0;
  // Expert outputs as combine reads them, and combine's result.
  ElementType combine_input = ElementType::bf16;
  ElementType combine_output = ElementType::f32;
  // Tokens a rank (a dp group) dispatches per call, at most.
  std::uint32_t max_tokens_per_rank = 128;
  // Experts per token (1..16); topk_idx entries of -1 are skipped.
  std::uint32_t top_k = 8;
  // Tokens per source written speculatively into the receiver's private
  // region together with the routes, before the routes of others are known.
  std::uint32_t max_private_tokens = 16;
  // Ranks [g*dp, (g+1)*dp) hold identical tokens; each sends a share.
  std::uint32_t dp_size = 1;
  // Ranks [n*node, (n+1)*node) share memory and copy directly.
  std::uint32_t node_size = 1;
  // Rows of each local expert in the dispatch output start at a multiple of this.
  std::uint32_t expert_alignment = 1;
  // Bound on every wait for peers; a rank that does not deliver in time is
  // named in the error.
  std::chrono::milliseconds timeout{10000};
  // (The group's immediates are not configured: create reserves 6 * world_size values on the
  // engine, the same block on every rank, and releases them with the group; docs/moe.md.)
  // Names this group's shared-memory arenas (unique per group instance).
  std::string session;
  // CPU threads of the host device.
  std::uint32_t host_threads = 1;
};

// Checks ranges and consistency; the message names the offending field.
[[nodiscard]] Status validate(const MoeConfig& config);

}  // namespace fabric::moe
