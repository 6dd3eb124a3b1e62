#include "fabric/moe/plan.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace fabric::moe {

namespace {

std::uint32_t* header_counts(std::byte* header) {
  return reinterpret_cast<std::uint32_t*>(header + sizeof(RouteHeader));
}

Status malformed(std::uint32_t source, const std::string& what) {
  return {Errc::malformed, "moe routes from rank " + std::to_string(source) + ": " + what};
}

}  // namespace

Result<SendPlan> plan_routes(const MoeConfig& c, std::uint32_t epoch,
                             std::span<const std::int32_t> topk_idx, std::uint32_t group_tokens,
                             std::span<std::byte> arena) {
  const Placement placement(c);
  const auto layout = arena_layout(c, c.rank);
  const std::uint32_t n = c.world_size;
  const std::uint32_t r = c.top_k;
  if (group_tokens > c.max_tokens_per_rank)
    return Status(Errc::invalid_argument, "moe dispatch: " + std::to_string(group_tokens) +
                                              " tokens > max_tokens_per_rank " +
                                              std::to_string(c.max_tokens_per_rank));
  if (topk_idx.size() < std::size_t{group_tokens} * r)
    return Status(Errc::invalid_argument, "moe dispatch: topk_idx holds " +
                                              std::to_string(topk_idx.size()) + " entries, " +
                                              std::to_string(std::size_t{group_tokens} * r) +
                                              " needed");
  for (std::uint32_t t = 0; t < group_tokens; ++t) {
    for (std::uint32_t k = 0; k < r; ++k) {
      const std::int32_t e = topk_idx[std::size_t{t} * r + k];
      if (e == -1) continue;
      if (e < 0 || static_cast<std::uint32_t>(e) >= c.num_experts)
        return Status(Errc::invalid_argument,
                      "moe dispatch: topk_idx[" + std::to_string(t) + "][" + std::to_string(k) +
                          "] = " + std::to_string(e) + " is not an expert (num_experts " +
                          std::to_string(c.num_experts) + ")");
      for (std::uint32_t k2 = 0; k2 < k; ++k2)
        if (topk_idx[std::size_t{t} * r + k2] == e)
          return Status(Errc::invalid_argument, "moe dispatch: token " + std::to_string(t) +
                                                    " names expert " + std::to_string(e) +
                                                    " twice");
    }
  }

  SendPlan p;
  p.epoch = epoch;
  p.group_tokens = group_tokens;
  p.chunk = token_chunk(group_tokens, c.dp_size, placement.dp_rank(c.rank));
  p.count.assign(n, 0);
  p.header.assign(n, 0);
  p.list_bytes.assign(n, 0);
  p.first.assign(n, 0);
  p.rows_from.assign(n, 0);
  p.rows_base.assign(n, 0);
  p.combine_row.assign(std::size_t{group_tokens} * r, -1);

  // Combine layout for the whole dp group: rows by expert rank, then token, then k.
  std::vector<std::uint32_t> owner(std::size_t{group_tokens} * r, n);
  for (std::uint32_t t = 0; t < group_tokens; ++t)
    for (std::uint32_t k = 0; k < r; ++k) {
      const std::int32_t e = topk_idx[std::size_t{t} * r + k];
      if (e >= 0) {
        const auto d = placement.owner(static_cast<std::uint32_t>(e));
        owner[std::size_t{t} * r + k] = d;
        ++p.rows_from[d];
      }
    }
  for (std::uint32_t d = 1; d < n; ++d) p.rows_base[d] = p.rows_base[d - 1] + p.rows_from[d - 1];
  std::vector<std::uint64_t> next_row(p.rows_base);
  std::vector<std::uint64_t> my_first_row(n, 0);
  std::vector<std::uint32_t> my_rows(n, 0);
  for (std::uint32_t t = 0; t < group_tokens; ++t) {
    if (t == p.chunk.begin) my_first_row = next_row;
    for (std::uint32_t k = 0; k < r; ++k) {
      const auto d = owner[std::size_t{t} * r + k];
      if (d == n) continue;
      if (t >= p.chunk.begin && t < p.chunk.end) ++my_rows[d];
      p.combine_row[std::size_t{t} * r + k] = static_cast<std::int32_t>(next_row[d]++);
    }
  }
  if (p.chunk.begin >= group_tokens) my_first_row = next_row;

  // Tokens per destination, in token order (a token goes once to each rank).
  std::vector<std::vector<std::uint32_t>> to(n);
  for (std::uint32_t t = p.chunk.begin; t < p.chunk.end; ++t) {
    for (std::uint32_t k = 0; k < r; ++k) {
      const auto d = owner[std::size_t{t} * r + k];
      if (d == n) continue;
      if (to[d].empty() || to[d].back() != t) to[d].push_back(t);
    }
  }
  std::uint64_t cursor = layout.send_offset;
  for (std::uint32_t d = 0; d < n; ++d) {
    p.count[d] = static_cast<std::uint32_t>(to[d].size());
    p.first[d] = static_cast<std::uint32_t>(p.token.size());
    p.token.insert(p.token.end(), to[d].begin(), to[d].end());
    p.header[d] = cursor + layout.list_capacity;
    p.list_bytes[d] = p.count[d] * r * 2;
    cursor += layout.list_capacity + layout.header_bytes + std::uint64_t{p.count[d]} * layout.slot_bytes;
  }
  if (cursor > layout.send_offset + layout.send_bytes)
    return Status(Errc::invalid_argument, "moe dispatch: send region overflow (internal)");

  if (arena.empty()) return p;
  for (std::uint32_t d = 0; d < n; ++d) {
    std::byte* header = arena.data() + p.header[d];
    auto* list = reinterpret_cast<std::uint16_t*>(header - p.list_bytes[d]);
    const std::uint32_t first_expert = placement.first_expert(d);
    for (std::uint32_t j = 0; j < p.count[d]; ++j) {
      const std::uint32_t t = to[d][j];
      for (std::uint32_t k = 0; k < r; ++k) {
        const std::int32_t e = topk_idx[std::size_t{t} * r + k];
        list[std::size_t{j} * r + k] = owner[std::size_t{t} * r + k] == d
                                           ? static_cast<std::uint16_t>(e - static_cast<std::int32_t>(first_expert))
                                           : kNotHere;
      }
    }
    RouteHeader h;
    h.magic = RouteHeader::kMagic;
    h.epoch = epoch;
    h.tokens = p.count[d];
    h.combine_rows = my_rows[d];
    h.combine_offset = my_first_row[d];
    h.send_offset = p.header[d] + layout.header_bytes;
    std::memcpy(header, &h, sizeof(h));
    std::memcpy(header_counts(header), p.count.data(), 4 * std::size_t{n});
  }
  return p;
}

std::uint64_t overflow_first_slot(const MoeConfig& c, std::span<const std::uint32_t> counts,
                                  std::uint32_t source, std::uint32_t d) {
  const Placement placement(c);
  const auto layout = arena_layout(c, d);
  std::uint64_t first = 0;
  for (std::uint32_t s = 0; s < source; ++s) {
    if (placement.same_node(s, d)) continue;
    const std::uint32_t sent = counts[std::size_t{s} * c.world_size + d];
    if (sent > layout.private_tokens) first += sent - layout.private_tokens;
  }
  return first;
}

Result<ReceivePlan> plan_receive(const MoeConfig& c, std::uint32_t epoch,
                                 std::span<const std::byte> arena) {
  const Placement placement(c);
  const std::uint32_t n = c.world_size;
  const std::uint32_t r = c.top_k;
  const std::uint32_t self = c.rank;
  const auto layout = arena_layout(c, self);
  const std::uint32_t local = placement.local_experts(self);

  ReceivePlan p;
  p.epoch = epoch;
  p.counts.assign(std::size_t{n} * n, 0);
  p.tokens_from.assign(n, 0);
  p.token_first.assign(n, 0);
  p.rows_first.assign(n, 0);
  p.rows_count.assign(n, 0);
  std::vector<RouteHeader> headers(n);
  std::vector<const std::uint16_t*> lists(n);
  for (std::uint32_t s = 0; s < n; ++s) {
    const std::byte* header = arena.data() + layout.header_offset(s);
    RouteHeader h;
    std::memcpy(&h, header, sizeof(h));
    if (h.magic != RouteHeader::kMagic) return malformed(s, "bad magic");
    if (h.epoch != epoch)
      return malformed(s, "epoch " + std::to_string(h.epoch) + " where " + std::to_string(epoch) +
                              " was expected (stale or misordered)");
    if (h.tokens > layout.source_tokens)
      return malformed(s, std::to_string(h.tokens) + " tokens > " +
                              std::to_string(layout.source_tokens) + " per source");
    std::memcpy(&p.counts[std::size_t{s} * n], header + sizeof(RouteHeader), 4 * std::size_t{n});
    if (p.counts[std::size_t{s} * n + self] != h.tokens)
      return malformed(s, "count row disagrees with its token count");
    for (std::uint32_t d = 0; d < n; ++d)
      if (p.counts[std::size_t{s} * n + d] > layout.source_tokens)
        return malformed(s, "count for rank " + std::to_string(d) + " too large");
    const auto source_layout = arena_layout(c, s);
    if (h.combine_offset + h.combine_rows > source_layout.combine_rows)
      return malformed(s, "combine rows out of bounds");
    // Node peers' (and this rank's own) tokens are read straight out of the
    // source's send region at send_offset: it must lie inside it.
    if (placement.same_node(s, self) && h.tokens > 0 &&
        (h.send_offset < source_layout.send_offset ||
         h.send_offset + std::uint64_t{h.tokens} * layout.slot_bytes >
             source_layout.send_offset + source_layout.send_bytes))
      return malformed(s, "send offset out of bounds");
    headers[s] = h;
    lists[s] = reinterpret_cast<const std::uint16_t*>(header - std::size_t{h.tokens} * r * 2);
    p.tokens_from[s] = h.tokens;
  }

  // Where every token is, and which local experts it goes to.
  std::vector<std::uint32_t> per_expert(local, 0);
  for (std::uint32_t s = 0; s < n; ++s) {
    const auto& h = headers[s];
    p.token_first[s] = static_cast<std::uint32_t>(p.slots.size());
    const bool direct = placement.same_node(s, self);
    const std::uint64_t overflow = direct ? 0 : overflow_first_slot(c, p.counts, s, self);
    std::uint32_t rows = 0;
    for (std::uint32_t j = 0; j < h.tokens; ++j) {
      SlotRef ref;
      if (direct) {
        ref = {s, h.send_offset + std::uint64_t{j} * layout.slot_bytes};
      } else if (j < layout.private_tokens) {
        ref = {self, layout.private_slot(s, j)};
      } else {
        ref = {self, layout.exchange_slot(overflow + j - layout.private_tokens)};
      }
      p.slots.push_back(ref);
      std::uint32_t here = 0;
      for (std::uint32_t k = 0; k < r; ++k) {
        const std::uint16_t e = lists[s][std::size_t{j} * r + k];
        if (e == kNotHere) continue;
        if (e >= local)
          return malformed(s, "token " + std::to_string(j) + " names local expert " +
                                  std::to_string(e) + " of " + std::to_string(local));
        ++per_expert[e];
        ++here;
      }
      if (here == 0) return malformed(s, "token " + std::to_string(j) + " has no expert here");
      rows += here;
    }
    if (rows != h.combine_rows)
      return malformed(s, "combine rows " + std::to_string(h.combine_rows) + " where its lists give " +
                              std::to_string(rows));
  }
  if (overflow_first_slot(c, p.counts, n, self) * layout.slot_bytes > layout.exchange_bytes)
    return Status(Errc::malformed, "moe routes: overflow exceeds the exchange region");

  // Grouped output: experts in order, each padded to the alignment.
  p.expert_begin.assign(local, 0);
  p.expert_count = per_expert;
  std::uint32_t end = 0;
  for (std::uint32_t e = 0; e < local; ++e) {
    p.expert_begin[e] = static_cast<std::uint32_t>(align_up(end, c.expert_alignment));
    end = p.expert_begin[e] + per_expert[e];
  }
  if (end > layout.recv_rows) return Status(Errc::malformed, "moe routes: more rows than recv_rows");
  p.row_slot.assign(end, ReceivePlan::kPadding);
  std::vector<std::uint32_t> next(p.expert_begin);
  // out_row[(slot) * r + k] for the combine gather.
  std::vector<std::uint32_t> out_row(p.slots.size() * r, ReceivePlan::kPadding);
  for (std::uint32_t s = 0; s < n; ++s)
    for (std::uint32_t j = 0; j < headers[s].tokens; ++j) {
      const std::uint32_t slot = p.token_first[s] + j;
      for (std::uint32_t k = 0; k < r; ++k) {
        const std::uint16_t e = lists[s][std::size_t{j} * r + k];
        if (e == kNotHere) continue;
        p.row_slot[next[e]] = slot;
        out_row[std::size_t{slot} * r + k] = next[e]++;
      }
    }
  for (std::uint32_t s = 0; s < n; ++s) {
    p.rows_first[s] = static_cast<std::uint32_t>(p.gather_row.size());
    for (std::uint32_t j = 0; j < headers[s].tokens; ++j) {
      const std::uint32_t slot = p.token_first[s] + j;
      for (std::uint32_t k = 0; k < r; ++k)
        if (out_row[std::size_t{slot} * r + k] != ReceivePlan::kPadding)
          p.gather_row.push_back(out_row[std::size_t{slot} * r + k]);
    }
    p.rows_count[s] = static_cast<std::uint32_t>(p.gather_row.size()) - p.rows_first[s];
  }

  // One combine write per dp group: its members' rows are contiguous here and there.
  const std::uint32_t dp = c.dp_size;
  for (std::uint32_t g = 0; g < placement.num_dp_groups(); ++g) {
    CombineWrite w;
    w.dp_group = g;
    w.first_row = p.rows_first[g * dp];
    w.dst_row = headers[g * dp].combine_offset;
    for (std::uint32_t m = 0; m < dp; ++m) {
      const std::uint32_t s = g * dp + m;
      if (headers[s].combine_offset != w.dst_row + w.rows)
        return malformed(s, "dp group " + std::to_string(g) +
                                " members disagree on the combine layout (are their topk_idx identical?)");
      w.rows += p.rows_count[s];
    }
    if (w.rows > 0) p.combine_writes.push_back(w);
  }
  return p;
}

}  // namespace fabric::moe
