#pragma once
// Requests are plain values: build one, hand it to a submit_* call.

#include <cstdint>
#include <optional>
#include <vector>

#include "fabric/memory.hpp"

namespace fabric {

// A local source range.
struct LocalSlice {
  MrHandle mr;
  std::uint64_t offset = 0;
};

// A remote destination range.
struct RemoteSlice {
  MrDesc mr;
  std::uint64_t offset = 0;
};

// Page i of a paged write starts at offset + indices[i] * stride.
struct Pages {
  std::vector<std::uint32_t> indices;
  std::uint64_t stride = 0;
  std::uint64_t offset = 0;
};

// Which Domains of the group carry a single write.
struct WriteRouting {
  enum class Mode : std::uint8_t { shard, pin };
  Mode mode = Mode::shard;
  // shard: split into this many pieces, round robin from Domain 0; 0 means one per Domain.
  std::uint32_t num_shards = 0;
  // pin: the Domain that carries the whole write.
  std::uint32_t domain = 0;

  static constexpr WriteRouting all_domains() noexcept { return {Mode::shard, 0, 0}; }
  static constexpr WriteRouting shards(std::uint32_t n) noexcept { return {Mode::shard, n, 0}; }
  static constexpr WriteRouting pinned(std::uint32_t domain) noexcept {
    return {Mode::pin, 1, domain};
  }
};

// The largest single RDMA WRITE the engine posts. A piece longer than this is
// split further, each part carrying the immediate (see docs/api.md, imm counts).
inline constexpr std::uint64_t kMaxWriteBytes = std::uint64_t{1} << 30;

struct SingleWrite {
  std::uint64_t length = 0;
  std::optional<std::uint32_t> imm;
  LocalSlice src;
  RemoteSlice dst;
  WriteRouting routing = WriteRouting::all_domains();
};

struct PagedWrite {
  std::uint64_t page_length = 0;
  std::optional<std::uint32_t> imm;
  MrHandle src;
  Pages src_pages;
  MrDesc dst;
  Pages dst_pages;
};

// An RDMA READ of `length` bytes from a peer's memory (src, registered there with
// Access::remote_read) into local registered memory (dst). READs carry no immediate: the reader's
// on_done is the only completion. `routing` spreads it over the Domains as for a single write.
struct SingleRead {
  std::uint64_t length = 0;
  RemoteSlice src;
  LocalSlice dst;
  WriteRouting routing = WriteRouting::all_domains();
};

// Page i: page_length bytes from src at src_pages' page i into dst at dst_pages' page i
// (page i on Domain i mod K). No immediate, as for SingleRead.
struct PagedRead {
  std::uint64_t page_length = 0;
  MrDesc src;
  Pages src_pages;
  MrHandle dst;
  Pages dst_pages;
};

}  // namespace fabric

namespace fabric {

// A peer group made by TransferEngine::add_peer_group: its addresses are
// resolved once, so scatters and barriers to it skip per-peer lookups.
struct PeerGroupHandle {
  std::uint64_t id = 0;
  std::uint32_t size = 0;
  friend bool operator==(const PeerGroupHandle&, const PeerGroupHandle&) = default;
};

// One peer's slice of a scatter: src[src_offset, +length) → dst[dst_offset, +length).
struct ScatterSlice {
  MrDesc dst;
  std::uint64_t length = 0;
  std::uint64_t src_offset = 0;
  std::uint64_t dst_offset = 0;
};

// How a scatter spreads over the Domains of the group (see docs/api.md for
// the immediate count of each).
struct ScatterRouting {
  enum class Mode : std::uint8_t {
    shard_peers,    // slice i on Domain i mod K: one WRITE per peer
    shard_bytes,    // each slice split over all K Domains: K WRITEs per peer
    single_domain,  // every slice on `domain`: one WRITE per peer
  };
  Mode mode = Mode::shard_peers;
  std::uint32_t domain = 0;

  static constexpr ScatterRouting peers() noexcept { return {Mode::shard_peers, 0}; }
  static constexpr ScatterRouting bytes() noexcept { return {Mode::shard_bytes, 0}; }
  static constexpr ScatterRouting pinned(std::uint32_t d) noexcept {
    return {Mode::single_domain, d};
  }
};

struct Scatter {
  // When set, slices[i] must target the group's peer i (same order and size).
  std::optional<PeerGroupHandle> group;
  MrHandle src;
  std::vector<ScatterSlice> slices;
  std::optional<std::uint32_t> imm;
  ScatterRouting routing;
};

// An immediate-only WRITE to each peer (peer i on Domain i mod K).
struct Barrier {
  std::optional<PeerGroupHandle> group;
  std::uint32_t imm = 0;
  std::vector<MrDesc> dsts;  // one per peer; in group order when group is set
};

}  // namespace fabric
