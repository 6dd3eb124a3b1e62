#pragma once
// Scatter to P peers: one slice of the source per peer. Peers are the target
// processes behind `links`, round robin: peer i is process i mod n, and its
// slice lands at offset (i / n) * slice there, so 64 peers need only a few
// processes. Besides bandwidth it reports what posting costs per scatter:
// the engine's submit_scatter call, and the raw loop's P posts.

#include <cstdint>
#include <vector>

#include "link.hpp"
#include "side.hpp"
#include "stats.hpp"

namespace bench {

struct ScatterRound {
  std::uint64_t slice = 0;    // bytes per peer
  std::uint64_t count = 0;    // scatters
  std::uint32_t window = 16;  // scatters outstanding
};

struct ScatterFigures {
  Figures f;
  double post_ns_p50 = 0;  // engine: the submit_scatter call; raw: posting all P writes
  double post_ns_p99 = 0;
};

ScatterFigures engine_scatter(Side& s, const std::vector<Peer>& peers,
                              const std::vector<Link*>& links, fabric::PeerGroupHandle group,
                              const ScatterRound& r);
ScatterFigures raw_scatter(Side& s, const std::vector<Peer>& peers,
                           const std::vector<Link*>& links, const ScatterRound& r);

}  // namespace bench
