#pragma once
// The plans both halves work from. SendPlan is the "count" step: from the dp
// group's topk_idx, which tokens go to which rank, where they are staged, and
// where the expert rows for each (token, k) will land on the way back.
// ReceivePlan is built from every source's routes header: where each source's
// tokens landed, the grouped-by-expert output order, and the combine writes.

#include <cstdint>
#include <span>
#include <vector>

#include "fabric/moe/config.hpp"
#include "fabric/moe/layout.hpp"
#include "fabric/status.hpp"

namespace fabric::moe {

struct SendPlan {
  std::uint32_t epoch = 0;
  std::uint32_t group_tokens = 0;  // tokens of the dp group this call
  TokenChunk chunk;                // the ones this rank sends
  // Per destination rank d:
  std::vector<std::uint32_t> count;        // tokens sent to d (n_{self,d})
  std::vector<std::uint64_t> header;       // arena offset of d's RouteHeader in the send region
  std::vector<std::uint32_t> list_bytes;   // bytes of d's token lists (right before the header)
  std::vector<std::uint32_t> first;        // d's tokens are token[first[d] .. first[d]+count[d])
  std::vector<std::uint32_t> token;        // token index (into the group's tokens), per slot
  // Combine, for the whole dp group: row of (t, k) in the combine region, or -1.
  std::vector<std::int32_t> combine_row;   // [group_tokens * top_k]
  std::vector<std::uint32_t> rows_from;    // rows expert rank d sends to this dp group
  std::vector<std::uint64_t> rows_base;    // their first row in the combine region
  [[nodiscard]] std::uint64_t slot(const ArenaLayout& layout, std::uint32_t d,
                                   std::uint32_t j) const noexcept {
    return header[d] + layout.header_bytes + std::uint64_t{j} * layout.slot_bytes;
  }
};

// Validates topk_idx ([group_tokens][top_k], -1 = none, no duplicates in a
// row) and plans this rank's share. The lists and headers are written into
// `send_region` (the arena, send_offset onwards) unless it is empty.
[[nodiscard]] Result<SendPlan> plan_routes(const MoeConfig& config, std::uint32_t epoch,
                                           std::span<const std::int32_t> topk_idx,
                                           std::uint32_t group_tokens, std::span<std::byte> arena);

// Where source s's token j lies, as a byte offset in `owner`'s arena.
struct SlotRef {
  std::uint32_t owner = 0;
  std::uint64_t offset = 0;
};

struct CombineWrite {
  std::uint32_t dp_group = 0;
  std::uint64_t first_row = 0;   // in this rank's exchange region (expert rows by source)
  std::uint64_t rows = 0;
  std::uint64_t dst_row = 0;     // in each member's combine region
};

struct ReceivePlan {
  std::uint32_t epoch = 0;
  std::vector<std::uint32_t> counts;        // counts[s * N + d]: tokens s sends to d (all s, d)
  std::vector<std::uint32_t> tokens_from;   // per source: tokens it sent here
  std::vector<std::uint32_t> token_first;   // per source: index of its first token in `slots`
  std::vector<SlotRef> slots;               // per (source, j), sources in rank order
  // Grouped output: local expert e owns rows [expert_begin[e], expert_begin[e] + expert_count[e]).
  std::vector<std::uint32_t> expert_begin;
  std::vector<std::uint32_t> expert_count;
  std::vector<std::uint32_t> row_slot;      // per output row: index into `slots` (or kPadding)
  // Combine send: exchange row i takes output row gather_row[i] (sources in rank order,
  // then token, then k).
  std::vector<std::uint32_t> gather_row;
  std::vector<std::uint32_t> rows_first;    // per source: first exchange row of its rows
  std::vector<std::uint32_t> rows_count;    // per source: its rows
  std::vector<CombineWrite> combine_writes;  // one per dp group that has rows here
  static constexpr std::uint32_t kPadding = 0xffffffffu;
};

// Parses the routes headers in this rank's private regions (every source's,
// its own included) and plans the receive side. Errc::malformed names the
// source whose header is stale, inconsistent or out of bounds.
[[nodiscard]] Result<ReceivePlan> plan_receive(const MoeConfig& config, std::uint32_t epoch,
                                               std::span<const std::byte> arena);

// Byte offset, in destination d's exchange region, of the overflow slots that
// `source` sends it (sources on d's node copy directly and use none).
[[nodiscard]] std::uint64_t overflow_first_slot(const MoeConfig& config,
                                                std::span<const std::uint32_t> counts,
                                                std::uint32_t source, std::uint32_t d);

}  // namespace fabric::moe
