#include "engine/write_plan.hpp"

#include <fmt/format.h>

#include "fabric/imm_counts.hpp"

namespace fabric::engine {

namespace {

WritePiece make_piece(WritePiece*, std::uint64_t offset, std::uint64_t length,
                      std::uint32_t domain) {
  return {offset, length, domain};
}
// A scatter's piece before its peer and slice offsets are filled in.
ScatterPiece make_piece(ScatterPiece*, std::uint64_t offset, std::uint64_t length,
                        std::uint32_t domain) {
  return {0, domain, offset, offset, length};
}

// The sharding of one write: emit(offset, length, domain) per WRITE, in posting order. The one
// place the rule lives; the plans and the public imm counts (fabric/imm_counts.hpp) all walk it.
template <typename Emit>
Status for_each_piece(std::uint64_t length, const WriteRouting& routing, std::uint32_t num_domains,
                      std::uint64_t max_write, Emit&& emit) {
  if (num_domains == 0) return Status(Errc::invalid_argument, "a group has at least one Domain");
  std::uint32_t shards = 1;
  std::uint32_t first_domain = 0;
  if (routing.mode == WriteRouting::Mode::pin) {
    if (routing.domain >= num_domains) {
      return Status(Errc::invalid_argument,
                    fmt::format("routing pins domain {} but the group has {} domains",
                                routing.domain, num_domains));
    }
    first_domain = routing.domain;
  } else if (routing.mode == WriteRouting::Mode::shard) {
    shards = routing.num_shards == 0 ? num_domains : routing.num_shards;
    if (shards > kMaxShards) {
      return Status(Errc::invalid_argument,
                    fmt::format("num_shards {} exceeds the limit of {}", shards, kMaxShards));
    }
  } else {
    return Status(Errc::invalid_argument, fmt::format("undefined WriteRouting::Mode {}",
                                                      static_cast<unsigned>(routing.mode)));
  }

  const std::uint64_t base_len = length / shards;
  const std::uint64_t longer = length % shards;
  std::uint64_t offset = 0;
  for (std::uint32_t i = 0; i < shards; ++i) {
    const std::uint64_t shard_len = base_len + (i < longer ? 1 : 0);
    const std::uint32_t domain = (first_domain + i) % num_domains;
    // A shard longer than one WRITE may carry becomes several, each with the imm.
    std::uint64_t left = shard_len;
    do {
      const std::uint64_t part = left < max_write ? left : max_write;
      emit(offset, part, domain);
      offset += part;
      left -= part;
    } while (left > 0);
  }
  return Status::success();
}

// The sharding of one write, appended to `out` (both piece types share it).
template <typename Piece>
Status plan_pieces(std::vector<Piece>& out, std::uint64_t length, const WriteRouting& routing,
                   std::uint32_t num_domains, std::uint64_t max_write) {
  return for_each_piece(length, routing, num_domains, max_write,
                        [&out](std::uint64_t offset, std::uint64_t part, std::uint32_t domain) {
                          out.push_back(make_piece(static_cast<Piece*>(nullptr), offset, part,
                                                   domain));
                        });
}

Result<std::uint64_t> count_pieces(std::uint64_t length, const WriteRouting& routing,
                                   std::uint32_t num_domains) {
  std::uint64_t n = 0;
  auto st = for_each_piece(length, routing, num_domains, kMaxWriteBytes,
                           [&n](std::uint64_t, std::uint64_t, std::uint32_t) { ++n; });
  if (!st.ok()) return st;
  return n;
}

// The per-peer routing of a scatter slice: the same choice plan_scatter_into makes.
Result<WriteRouting> slice_routing(const ScatterRouting& routing, std::uint32_t peer,
                                   std::uint32_t num_domains) {
  switch (routing.mode) {
    case ScatterRouting::Mode::shard_peers:
      return WriteRouting::pinned(peer % num_domains);
    case ScatterRouting::Mode::shard_bytes:
      return WriteRouting::shards(num_domains);
    case ScatterRouting::Mode::single_domain:
      return WriteRouting::pinned(routing.domain);
  }
  return Status(Errc::invalid_argument, fmt::format("undefined ScatterRouting::Mode {}",
                                                    static_cast<unsigned>(routing.mode)));
}

}  // namespace

Result<std::vector<WritePiece>> plan_single_write(std::uint64_t length,
                                                  const WriteRouting& routing,
                                                  std::uint32_t num_domains,
                                                  std::uint64_t max_write) {
  std::vector<WritePiece> pieces;
  if (auto st = plan_single_write_into(pieces, length, routing, num_domains, max_write);
      !st.ok()) {
    return st;
  }
  return pieces;
}

Status plan_single_write_into(std::vector<WritePiece>& out, std::uint64_t length,
                              const WriteRouting& routing, std::uint32_t num_domains,
                              std::uint64_t max_write) {
  return plan_pieces(out, length, routing, num_domains, max_write);
}

Result<std::vector<ScatterPiece>> plan_scatter(const std::vector<ScatterSlice>& slices,
                                               const ScatterRouting& routing,
                                               std::uint32_t num_domains,
                                               std::uint64_t max_write) {
  std::vector<ScatterPiece> out;
  if (auto st = plan_scatter_into(out, slices, routing, num_domains, max_write); !st.ok()) {
    return st;
  }
  return out;
}

Status plan_scatter_into(std::vector<ScatterPiece>& out, const std::vector<ScatterSlice>& slices,
                         const ScatterRouting& routing, std::uint32_t num_domains,
                         std::uint64_t max_write) {
  out.reserve(out.size() +
              slices.size() * (routing.mode == ScatterRouting::Mode::shard_bytes ? num_domains : 1));
  for (std::uint32_t p = 0; p < slices.size(); ++p) {
    const ScatterSlice& s = slices[p];
    auto routed = slice_routing(routing, p, num_domains);
    if (!routed) return routed.status();
    const WriteRouting per_peer = *routed;
    // A pinned slice that fits one WRITE is that WRITE, as plan_pieces would make it: most
    // slices of a dispatch are, and this skips the general sharding per slice.
    if (per_peer.mode == WriteRouting::Mode::pin && per_peer.domain < num_domains &&
        s.length <= max_write) {
      out.push_back({p, per_peer.domain, s.src_offset, s.dst_offset, s.length});
      continue;
    }
    // Planned in place: the peer's pieces go straight into `out`, then get their offsets.
    const std::size_t first = out.size();
    if (auto st = plan_pieces(out, s.length, per_peer, num_domains, max_write); !st.ok()) {
      return st;
    }
    for (std::size_t i = first; i < out.size(); ++i) {
      ScatterPiece& piece = out[i];
      piece.peer = p;
      piece.src_offset += s.src_offset;
      piece.dst_offset += s.dst_offset;
    }
  }
  return Status::success();
}

}  // namespace fabric::engine

namespace fabric {

Result<std::uint64_t> single_write_imm_count(std::uint64_t length, std::uint32_t num_domains,
                                             const WriteRouting& routing) {
  return engine::count_pieces(length, routing, num_domains);
}

Result<std::uint64_t> scatter_imm_count(std::uint64_t length, std::uint32_t num_domains,
                                        const ScatterRouting& routing) {
  if (num_domains == 0) return Status(Errc::invalid_argument, "a group has at least one Domain");
  // Every peer's slice is routed alike but for shard_peers' Domain, which does not change the
  // count: peer 0 stands for all.
  auto routed = engine::slice_routing(routing, 0, num_domains);
  if (!routed) return routed.status();
  return engine::count_pieces(length, *routed, num_domains);
}

}  // namespace fabric
