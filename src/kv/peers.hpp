#pragma once
// The peers one side talks to, with what liveness needs of each: its address, when it was last
// heard (a KV message, or the engine's own liveness of it: TransferEngine::watch_peer, one ping
// stream per peer for every workload on the engine), whether it was declared dead. The Sender's
// peers are decoders (added by their HELLO), the Receiver's are prefill ranks (added by
// connect()). A peer keeps its index for the table's life, also when it is replaced by a new
// epoch of the same instance.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "fabric/peer_watch.hpp"
#include "link.hpp"

namespace fabric::kv {

struct PeerLife {
  NetAddr addr;
  Clock::time_point last_seen{};
  bool alive = true;
  bool joined = false;  // its handshake finished: it is watched from then on
  PeerWatch watch;      // the engine's liveness of it (Link::watch), from its join
  // The later of its last KV message and the engine's last answer from it.
  [[nodiscard]] Clock::time_point last_heard() const noexcept {
    return watch.is_open() ? std::max(last_seen, watch.last_heard()) : last_seen;
  }
};

template <typename Peer>  // a PeerLife and what the side knows besides
class PeerTable {
 public:
  [[nodiscard]] std::optional<std::uint32_t> index_of(std::uint64_t instance) const {
    auto it = by_instance_.find(instance);
    if (it == by_instance_.end()) return std::nullopt;
    return it->second;
  }
  [[nodiscard]] Peer* find(std::uint64_t instance) {
    auto i = index_of(instance);
    return i ? &peers_[*i] : nullptr;
  }
  // Adds the peer at addr.instance_id(), or replaces the one there under its index.
  std::uint32_t put(Peer peer) {
    const std::uint64_t instance = peer.addr.instance_id();
    if (auto i = index_of(instance)) {
      peers_[*i] = std::move(peer);
      return *i;
    }
    const auto i = static_cast<std::uint32_t>(peers_.size());
    peers_.push_back(std::move(peer));
    by_instance_[instance] = i;
    return i;
  }
  [[nodiscard]] Peer& operator[](std::uint32_t i) { return peers_[i]; }
  [[nodiscard]] const Peer& operator[](std::uint32_t i) const { return peers_[i]; }
  [[nodiscard]] std::uint32_t size() const { return static_cast<std::uint32_t>(peers_.size()); }
  // A joined peer at index i, as the public calls take sources.
  [[nodiscard]] bool joined(std::uint32_t i) const { return i < size() && peers_[i].joined; }

  // A message came from `instance`: the index of its peer, whose silence ends if it is alive;
  // nullopt for an instance this side does not know.
  std::optional<std::uint32_t> heard(std::uint64_t instance, Clock::time_point now) {
    auto i = index_of(instance);
    if (i && peers_[*i].alive) peers_[*i].last_seen = now;
    return i;
  }

  // A tick: every live joined peer silent past dead_after goes to on_silent(index), which
  // decides what its silence means (the Sender fails its transfers, the Receiver fences it). The
  // engine pings the peers; nothing is sent from here.
  template <typename OnSilent>
  void pulse(Clock::time_point now, std::chrono::milliseconds dead_after, OnSilent&& on_silent) {
    for (std::uint32_t i = 0; i < size(); ++i) {
      Peer& p = peers_[i];
      if (p.alive && p.joined && now - p.last_heard() > dead_after) on_silent(i);
    }
  }

 private:
  std::vector<Peer> peers_;
  std::unordered_map<std::uint64_t, std::uint32_t> by_instance_;
};

}  // namespace fabric::kv
