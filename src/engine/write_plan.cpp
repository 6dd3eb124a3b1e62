#include "engine/write_plan.hpp"

#include <fmt/format.h>

namespace fabric::engine {

Result<std::vector<WritePiece>> plan_single_write(std::uint64_t length,
                                                  const WriteRouting& routing,
                                                  std::uint32_t num_domains,
                                                  std::uint64_t max_write) {
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

  std::vector<WritePiece> pieces;
  pieces.reserve(shards);
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
      pieces.push_back({offset, part, domain});
      offset += part;
      left -= part;
    } while (left > 0);
  }
  return pieces;
}

Result<std::vector<ScatterPiece>> plan_scatter(const std::vector<ScatterSlice>& slices,
                                               const ScatterRouting& routing,
                                               std::uint32_t num_domains,
                                               std::uint64_t max_write) {
  std::vector<ScatterPiece> out;
  out.reserve(slices.size() * (routing.mode == ScatterRouting::Mode::shard_bytes ? num_domains : 1));
  for (std::uint32_t p = 0; p < slices.size(); ++p) {
    const ScatterSlice& s = slices[p];
    WriteRouting per_peer;
    switch (routing.mode) {
      case ScatterRouting::Mode::shard_peers:
        per_peer = WriteRouting::pinned(p % num_domains);
        break;
      case ScatterRouting::Mode::shard_bytes:
        per_peer = WriteRouting::shards(num_domains);
        break;
      case ScatterRouting::Mode::single_domain:
        per_peer = WriteRouting::pinned(routing.domain);
        break;
      default:
        return Status(Errc::invalid_argument, fmt::format("undefined ScatterRouting::Mode {}",
                                                          static_cast<unsigned>(routing.mode)));
    }
    auto pieces = plan_single_write(s.length, per_peer, num_domains, max_write);
    if (!pieces) return pieces.status();
    for (const WritePiece& w : *pieces) {
      out.push_back({p, w.domain, s.src_offset + w.offset, s.dst_offset + w.offset, w.length});
    }
  }
  return out;
}

}  // namespace fabric::engine
