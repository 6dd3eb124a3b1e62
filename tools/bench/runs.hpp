#pragma once
// Timed rounds on the initiator. Each round: the target is told how many
// immediates to expect, the clock starts, requests are kept `window` deep,
// and the clock stops when the target reports that it counted them all.
// Latency is per request: submit (or first post) → local completion.

#include <cstdint>
#include <vector>

#include "link.hpp"
#include "side.hpp"
#include "stats.hpp"

namespace bench {

struct WriteRound {
  std::uint64_t size = 0;     // bytes per write, or per page
  std::uint64_t count = 0;    // writes, or batches
  std::uint32_t window = 64;  // writes (or batches) outstanding
  std::uint32_t pages = 0;    // 0: single writes; else pages per batch
};

// Where page i of a batch lands: an odd stride mixes the order so the
// destination is a real scatter, not one contiguous copy.
std::vector<std::uint32_t> dst_page_order(std::uint32_t pages);

Figures engine_writes(Side& s, const Peer& peer, Link& link, const WriteRound& r);
Figures raw_writes(Side& s, const Peer& peer, Link& link, const WriteRound& r);

// Engine SENDs of `r.size` bytes, `r.window` deep; returns false in
// `verified` when the target's checksum of the last message differs.
Figures engine_sends(Side& s, const Peer& peer, Link& link, const WriteRound& r, bool& verified);

// Immediate-only round trips, one at a time.
Figures engine_imm_rtt(Side& s, const Peer& peer, Link& link, std::uint64_t count);
Figures raw_imm_rtt(Side& s, const Peer& peer, Link& link, std::uint64_t count);

}  // namespace bench
