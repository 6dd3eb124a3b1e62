#pragma once
// Where experts live, which ranks share tokens or memory, and the byte layout
// of each rank's registered arena. Pure functions of MoeConfig, so every rank
// computes every other rank's layout without asking it.

#include <cstdint>

#include "fabric/moe/config.hpp"

namespace fabric::moe {

inline constexpr std::uint16_t kNotHere = 0xffff;  // routes entry: expert k is not on this rank

[[nodiscard]] constexpr std::uint64_t align_up(std::uint64_t v, std::uint64_t a) noexcept {
  return (v + a - 1) / a * a;
}

class Placement {
 public:
  explicit Placement(const MoeConfig& c) noexcept
      : n_(c.world_size), e_(c.num_experts), dp_(c.dp_size), node_(c.node_size) {}

  [[nodiscard]] std::uint32_t world_size() const noexcept { return n_; }
  [[nodiscard]] std::uint32_t first_expert(std::uint32_t rank) const noexcept {
    return static_cast<std::uint32_t>(std::uint64_t{rank} * e_ / n_);
  }
  [[nodiscard]] std::uint32_t local_experts(std::uint32_t rank) const noexcept {
    return first_expert(rank + 1) - first_expert(rank);
  }
  [[nodiscard]] std::uint32_t max_local_experts() const noexcept { return (e_ + n_ - 1) / n_; }
  [[nodiscard]] std::uint32_t owner(std::uint32_t expert) const noexcept {
    // The largest r with first_expert(r) <= expert.
    std::uint32_t r = static_cast<std::uint32_t>((std::uint64_t{expert} + 1) * n_ / e_);
    if (r >= n_) r = n_ - 1;
    while (first_expert(r) > expert) --r;
    while (r + 1 < n_ && first_expert(r + 1) <= expert) ++r;
    return r;
  }
  [[nodiscard]] std::uint32_t dp_group(std::uint32_t rank) const noexcept { return rank / dp_; }
  [[nodiscard]] std::uint32_t dp_rank(std::uint32_t rank) const noexcept { return rank % dp_; }
  [[nodiscard]] std::uint32_t dp_size() const noexcept { return dp_; }
  [[nodiscard]] std::uint32_t num_dp_groups() const noexcept { return n_ / dp_; }
  [[nodiscard]] std::uint32_t node(std::uint32_t rank) const noexcept { return rank / node_; }
  [[nodiscard]] bool same_node(std::uint32_t a, std::uint32_t b) const noexcept {
    return node(a) == node(b);
  }

 private:
  std::uint32_t n_, e_, dp_, node_;
};

// Tokens [begin, end) of a dp group's `count` that dp member `member` sends.
struct TokenChunk {
  std::uint32_t begin = 0;
  std::uint32_t end = 0;
};
[[nodiscard]] constexpr TokenChunk token_chunk(std::uint32_t count, std::uint32_t dp_size,
                                               std::uint32_t member) noexcept {
  const std::uint32_t per = (count + dp_size - 1) / dp_size;
  const std::uint32_t b = per * member < count ? per * member : count;
  const std::uint32_t e = b + per < count ? b + per : count;
  return {b, e};
}

// Header of one source's routes message, at a fixed offset of its region on
// the receiver; its token lists end right before it and its private token
// slots start right after it, so routes and private tokens are one WRITE.
struct RouteHeader {
  static constexpr std::uint32_t kMagic = 0x4d6f4552;  // "REoM"
  std::uint32_t magic = 0;
  std::uint32_t epoch = 0;        // the iteration this message belongs to
  std::uint32_t tokens = 0;       // tokens this source sends to the receiver
  std::uint32_t combine_rows = 0;    // rows the receiver sends back for them
  std::uint64_t combine_offset = 0;  // row index in the source's combine region for them
  std::uint64_t send_offset = 0;  // byte offset of these tokens' slots in the source's arena
  // Followed by world_size u32: tokens this source sends to each rank.
};
static_assert(sizeof(RouteHeader) == 32);

// One rank's arena: [flags | private regions (one per source) | exchange |
// dispatch send | combine receive]. Offsets in bytes from the arena start.
struct ArenaLayout {
  std::uint64_t slot_bytes = 0;       // token payload + scales, 16-byte aligned
  std::uint64_t row_bytes = 0;        // one expert output row, 16-byte aligned
  std::uint32_t source_tokens = 0;    // most tokens one source sends (ceil(T / dp))
  std::uint32_t private_tokens = 0;   // min(max_private_tokens, source_tokens)
  std::uint64_t list_capacity = 0;    // bytes of token lists before a header
  std::uint64_t header_bytes = 0;     // RouteHeader + counts, 16-byte aligned
  std::uint64_t source_region = 0;    // list_capacity + header_bytes + private slots

  std::uint64_t flags_offset = 0;     // u64 words, see flag_* below
  std::uint64_t flags_bytes = 0;
  std::uint64_t private_offset = 0;   // source s at private_offset + s*source_region
  std::uint64_t exchange_offset = 0;  // overflow slots (dispatch) / expert rows (combine send)
  std::uint64_t exchange_bytes = 0;
  std::uint64_t send_offset = 0;      // per destination: lists, header, slots (packed)
  std::uint64_t send_bytes = 0;
  std::uint64_t combine_offset = 0;   // rows from every expert rank, for this dp group
  std::uint64_t combine_bytes = 0;
  std::uint64_t total_bytes = 0;

  std::uint32_t recv_rows = 0;        // rows the dispatch output may hold (with padding)
  std::uint32_t combine_rows = 0;     // rows the combine region holds (T * top_k)

  // Flag words (u64): 0 = this rank's send slots are staged for `epoch`;
  // 1 + s = source s pushed its combine rows here for `epoch`.
  [[nodiscard]] std::uint64_t flag_send_ready() const noexcept { return flags_offset; }
  [[nodiscard]] std::uint64_t flag_combine_from(std::uint32_t s) const noexcept {
    return flags_offset + 8 * (1 + std::uint64_t{s});
  }
  [[nodiscard]] std::uint64_t header_offset(std::uint32_t source) const noexcept {
    return private_offset + source * source_region + list_capacity;
  }
  [[nodiscard]] std::uint64_t private_slot(std::uint32_t source, std::uint32_t j) const noexcept {
    return header_offset(source) + header_bytes + j * slot_bytes;
  }
  [[nodiscard]] std::uint64_t exchange_slot(std::uint64_t index) const noexcept {
    return exchange_offset + index * slot_bytes;
  }
  [[nodiscard]] std::uint64_t exchange_row(std::uint64_t index) const noexcept {
    return exchange_offset + index * row_bytes;
  }
  [[nodiscard]] std::uint64_t combine_row(std::uint64_t index) const noexcept {
    return combine_offset + index * row_bytes;
  }
};

// The layout of `rank`'s arena (sizes depend on its number of local experts).
[[nodiscard]] ArenaLayout arena_layout(const MoeConfig& config, std::uint32_t rank);

// Payload bytes of one dispatched token (without padding).
[[nodiscard]] inline std::uint64_t token_bytes(const MoeConfig& c) noexcept {
  return std::uint64_t{c.hidden} * c.dispatch_element_bytes;
}
[[nodiscard]] inline std::uint64_t scale_bytes(const MoeConfig& c) noexcept {
  return std::uint64_t{c.num_scales} * 4;
}

}  // namespace fabric::moe
