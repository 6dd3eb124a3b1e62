#pragma once
// --peer NAME: the single-write and paged-write rows of this run, measured
// again through another transfer engine (tools/bench/peers/peer_bench.py, in
// its own interpreter) right after the sweep, so every row can carry the
// ratio engine / peer from the same run on the same machine.

#include <string>
#include <vector>

#include "options.hpp"
#include "sweep.hpp"

namespace bench {

struct PeerFigure {
  std::string op;
  std::uint64_t size = 0;
  std::uint64_t count = 0;
  std::uint64_t iterations = 0;
  double gbps = 0;
  bool verified = false;
};

struct PeerRun {
  std::string peer;       // "mooncake", "nixl"
  std::string transport;  // the peer's own transport: "tcp" or "shm"
  std::string version;
  std::string network;    // where the peer's processes ran ("private namespace, lo only")
  std::string error;      // empty when it ran; else why it did not (or stopped)
  std::vector<PeerFigure> figures;

  const PeerFigure* find(const Row& row) const;
};

// Transport a peer uses next to this provider: shm beside shm, tcp otherwise.
std::string peer_transport(const std::string& provider);

// One run per requested peer. Never throws for a peer that cannot run here:
// the reason lands in PeerRun::error.
std::vector<PeerRun> run_peers(const Options& opt, const SweepResult& sweep);

}  // namespace bench
