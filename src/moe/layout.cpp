#include "fabric/moe/layout.hpp"

#include <algorithm>
#include <string>

namespace fabric::moe {

namespace {
Status bad(std::string what) { return {Errc::invalid_argument, "moe config: " + std::move(what)}; }
}  // namespace

Status validate(const MoeConfig& c) {
  if (c.world_size == 0 || c.world_size > kMaxWorldSize)
    return bad("world_size " + std::to_string(c.world_size) + " outside [1, 4096]");
  if (c.rank >= c.world_size)
    return bad("rank " + std::to_string(c.rank) + " >= world_size " + std::to_string(c.world_size));
  if (c.num_experts == 0) return bad("num_experts is 0");
  if (c.num_experts >= kNotHere) return bad("num_experts " + std::to_string(c.num_experts) + " >= 65535");
  if (c.hidden == 0) return bad("hidden is 0");
  if (c.dispatch_element_bytes != 1 && c.dispatch_element_bytes != 2 && c.dispatch_element_bytes != 4)
    return bad("dispatch_element_bytes " + std::to_string(c.dispatch_element_bytes) + " is not 1, 2 or 4");
  if (c.max_tokens_per_rank == 0) return bad("max_tokens_per_rank is 0");
  if (c.top_k == 0 || c.top_k > kMaxTopK)
    return bad("top_k " + std::to_string(c.top_k) + " outside [1, 16]");
  if (c.dp_size == 0 || c.world_size % c.dp_size != 0)
    return bad("dp_size " + std::to_string(c.dp_size) + " does not divide world_size " +
               std::to_string(c.world_size));
  if (c.node_size == 0) return bad("node_size is 0");
  if (c.expert_alignment == 0) return bad("expert_alignment is 0");
  if (c.timeout.count() <= 0) return bad("timeout must be positive");
  if (c.host_threads == 0 || c.host_threads > 256) return bad("host_threads outside [1, 256]");
  // One slice of a scatter must stay one WRITE (imm count 1), so every region under 1 GiB.
  const auto layout = arena_layout(c, c.rank);
  if (layout.total_bytes >= (std::uint64_t{1} << 30))
    return bad("arena of " + std::to_string(layout.total_bytes) +
               " bytes is 1 GiB or more; lower max_tokens_per_rank or hidden");
  return Status::success();
}

ArenaLayout arena_layout(const MoeConfig& c, std::uint32_t rank) {
  const Placement placement(c);
  const std::uint64_t n = c.world_size;
  const std::uint64_t r = c.top_k;
  const std::uint64_t local = placement.local_experts(rank);
  ArenaLayout l;
  l.slot_bytes = align_up(token_bytes(c) + scale_bytes(c), 16);
  l.row_bytes = align_up(std::uint64_t{c.hidden} * element_bytes(c.combine_input), 16);
  l.source_tokens = (c.max_tokens_per_rank + c.dp_size - 1) / c.dp_size;
  l.private_tokens = std::min(c.max_private_tokens, l.source_tokens);
  l.list_capacity = align_up(std::uint64_t{l.source_tokens} * r * 2, 16);
  l.header_bytes = align_up(sizeof(RouteHeader) + 4 * n, 16);
  l.source_region = l.list_capacity + l.header_bytes + l.private_tokens * l.slot_bytes;

  const std::uint64_t rows_per_source = std::uint64_t{l.source_tokens} * std::min<std::uint64_t>(r, local);
  l.recv_rows = static_cast<std::uint32_t>(n * rows_per_source + local * (c.expert_alignment - 1));
  l.combine_rows = c.max_tokens_per_rank * c.top_k;

  std::uint64_t at = 0;
  l.flags_offset = at;
  l.flags_bytes = align_up(8 * (1 + n), 64);
  at += l.flags_bytes;
  l.private_offset = at;
  at += align_up(n * l.source_region, 64);
  l.exchange_offset = at;
  const std::uint64_t overflow =
      local == 0 ? 0 : n * (l.source_tokens - l.private_tokens) * l.slot_bytes;
  l.exchange_bytes = align_up(std::max(overflow, n * rows_per_source * l.row_bytes), 64);
  at += l.exchange_bytes;
  l.send_offset = at;
  l.send_bytes = align_up(n * (l.list_capacity + l.header_bytes) +
                              std::uint64_t{l.source_tokens} * std::min<std::uint64_t>(r, n) * l.slot_bytes,
                          64);
  at += l.send_bytes;
  l.combine_offset = at;
  l.combine_bytes = align_up(std::uint64_t{l.combine_rows} * l.row_bytes, 64);
  at += l.combine_bytes;
  l.total_bytes = at;
  return l;
}

}  // namespace fabric::moe
