#pragma once
// The peers one engine has resolved, for metrics(): how many it knows, how many it found gone,
// and which of them have a `peer` label of their own. Every group's worker resolves peers on
// its own; this table is the engine's one view of them. Touched where a worker first resolves a
// peer, finds one gone, or fences one, never per request: a mutex, and allocation only there.

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace fabric::engine {

class PeerIndex {
 public:
  // Op::peer_slot of a request counted under no peer (a scatter or barrier, labels off).
  static constexpr std::uint32_t kNoSlot = ~std::uint32_t{0};

  // `labelled`: EngineConfig::metrics_peer_labels.
  explicit PeerIndex(std::uint32_t labelled) : labelled_(labelled) {}

  // Per-peer counter slots in each worker: one per labelled peer, then one for the rest; none
  // when no peer is labelled.
  [[nodiscard]] std::uint32_t slots() const noexcept { return labelled_ == 0 ? 0 : labelled_ + 1; }

  // A worker resolved the peer engine `instance`: it is known (again, after a fence). Returns
  // its counter slot: its own if it is among the first `labelled` peers ever resolved (kept for
  // the engine's life, so a label never changes peer), else the shared last one; kNoSlot when
  // none are labelled.
  std::uint32_t known(std::uint64_t instance);
  // A known peer was found gone (its request expired while it answered nothing, or a post to it
  // was refused with an error). Counted once until it is fenced and resolved again; a peer never
  // resolved is not counted.
  void lost(std::uint64_t instance);
  // fence_peer: lost (unless already) and forgotten, so resolving it again makes it known.
  void fenced(std::uint64_t instance);

  struct Counts {
    std::uint64_t known = 0;
    std::uint64_t lost = 0;
  };
  [[nodiscard]] Counts counts() const;
  // The instance ids of the labelled peers, slot i at [i].
  [[nodiscard]] std::vector<std::uint64_t> labelled_peers() const;

 private:
  struct Peer {
    std::uint32_t slot = kNoSlot;
    bool lost = false;
  };
  const std::uint32_t labelled_;
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, Peer> peers_;  // known or lost, not fenced
  std::vector<std::uint64_t> labelled_ids_;        // slot i's peer at [i]; never shrinks
  std::uint64_t known_ = 0;
  std::uint64_t lost_ = 0;
};

}  // namespace fabric::engine
