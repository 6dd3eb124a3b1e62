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
  std::uint32_t threads = 1;  // engine rounds: submitting threads, each `window` deep
  // Raw rounds with --breakdown: how long each accepted fi_writedata call took, in ns (the
  // provider's own part of the engine's call → first post).
  std::vector<std::uint64_t>* post_call_ns = nullptr;
};

// One bidirectional round of single writes: both directions' figures, each
// timed by its sender (first submit to last local completion).
struct BidirFigures {
  Figures out;  // initiator → target (latencies: the initiator's requests)
  Figures in;   // target → initiator (rate only)
  bool verified = false;  // both destinations hold what their sources sent
};

// The target's half of a bidirectional round lands at this offset of the
// initiator's buffer (and is read from its own half), so neither direction
// reads what the other writes.
inline std::uint64_t bidir_offset(std::uint64_t buffer_bytes) { return buffer_bytes / 2; }

// Where page i of a batch lands: an odd stride mixes the order so the
// destination is a real scatter, not one contiguous copy.
std::vector<std::uint32_t> dst_page_order(std::uint32_t pages);

Figures engine_writes(Side& s, const Peer& peer, Link& link, const WriteRound& r);
// The same on another engine of this side (--metrics-ab's unmetered one).
Figures engine_writes(const WriteEngine& e, const Peer& peer, Link& link, const WriteRound& r);
Figures raw_writes(Side& s, const Peer& peer, Link& link, const WriteRound& r);

BidirFigures engine_bidir_writes(Side& s, const Peer& peer, Link& link, const WriteRound& r);

// Where addressed SENDs go: `channel` on the initiator's engine, to the target's second engine,
// which receives on a channel of the same name (TransferEngine::channel).
struct ChannelRoute {
  fabric::Channel* channel = nullptr;
  fabric::NetAddr to;
};

// Engine SENDs of `r.size` bytes, `r.window` deep; returns false in
// `verified` when the target's checksum of the last message differs. With `via`, the same
// SENDs on a channel (sendrecv_addressed), so the two differ only by the channel path.
Figures engine_sends(Side& s, const Peer& peer, Link& link, const WriteRound& r, bool& verified,
                     const ChannelRoute* via = nullptr);

// Immediate-only round trips, one at a time. caller_progress: both sides wait for the pong
// (ping) in TransferEngine::progress() instead of leaving the worker threads to deliver it.
Figures engine_imm_rtt(Side& s, const Peer& peer, Link& link, std::uint64_t count,
                       bool caller_progress);
Figures raw_imm_rtt(Side& s, const Peer& peer, Link& link, std::uint64_t count);

}  // namespace bench
