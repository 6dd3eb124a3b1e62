#pragma once
// Peer liveness as a service of the engine (TransferEngine::watch_peer, docs/api.md "Peer
// liveness"): every workload on the engine that needs to know whether a peer process still
// answers watches it, and the engine keeps one ping stream per peer for all of them, on the
// reserved channel "fabric.liveness" that every engine on channels answers by itself. A peer is
// silent once nothing came from it for silent_after; a silent peer that answers again is alive
// again (a stopped, starved or partitioned process is not a dead one; what a workload does on
// silence, such as failing or fencing, is its own decision).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "fabric/net_addr.hpp"

namespace fabric {

namespace engine {
class PeerLiveness;
struct PeerWatchEntry;
}  // namespace engine

enum class PeerState : std::uint8_t { alive, silent };

struct PeerWatchOptions {
  // How often the engine pings the peer while anyone watches it (the shortest interval of its
  // watchers); must be positive.
  std::chrono::milliseconds interval{1000};
  // Silent after this long without a ping or an answer from the peer; 0: 2 intervals + the
  // engine's request_timeout, which a peer's own slow completions never reach.
  std::chrono::milliseconds silent_after{0};
};

// Runs on the engine's liveness thread ("fabric-live") at each change of the peer's state, for
// this watch; never after the watch is closed (close() waits for a call in progress, unless
// called from inside it).
using PeerStateCallback = std::function<void(const NetAddr& peer, PeerState state)>;

// One watcher of one peer: move-only, closed (its callback never called after) when destroyed or
// close()d, also after its engine stopped.
class PeerWatch {
 public:
  PeerWatch() = default;
  ~PeerWatch();
  PeerWatch(PeerWatch&& other) noexcept;
  PeerWatch& operator=(PeerWatch&& other) noexcept;
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  [[nodiscard]] bool is_open() const noexcept;
  // As this watch last saw it (alive until silent_after has passed since the watch began).
  [[nodiscard]] PeerState state() const noexcept;
  // When the engine last heard from the peer (a ping or an answer), or when the watch began.
  [[nodiscard]] std::chrono::steady_clock::time_point last_heard() const noexcept;
  [[nodiscard]] std::chrono::milliseconds silent_after() const noexcept;
  // Idempotent.
  void close() noexcept;

 private:
  friend class engine::PeerLiveness;
  PeerWatch(std::shared_ptr<engine::PeerLiveness> service,
            std::shared_ptr<engine::PeerWatchEntry> entry);
  std::shared_ptr<engine::PeerLiveness> service_;
  std::shared_ptr<engine::PeerWatchEntry> entry_;
};

}  // namespace fabric
