#pragma once
// The engine's peer liveness (fabric/peer_watch.hpp): one record per watched peer, however many
// watchers it has, pinged on the reserved channel "fabric.liveness" by one thread that does
// nothing else, so a busy data path or a slow workload callback delays no ping and no verdict.
// Pings are answered by the channel router of every engine on channels (answer_liveness), so a
// peer needs no watcher of its own to be watched.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fabric/channel.hpp"
#include "fabric/topology.hpp"
#include "fabric/peer_watch.hpp"
#include "fabric/status.hpp"

namespace fabric::engine {

class ChannelRouter;
struct ChannelEntry;

inline constexpr char kLivenessChannel[] = "fabric.liveness";

struct PeerRecord;

struct PeerWatchEntry {
  std::shared_ptr<PeerRecord> peer;
  std::chrono::milliseconds interval{0};
  std::chrono::milliseconds silent_after{0};
  PeerStateCallback on_change;
  std::atomic<PeerState> state{PeerState::alive};
  std::chrono::steady_clock::time_point began;
  std::mutex callback_mutex;  // held while on_change runs, so close() can wait for it
  std::atomic<bool> closed{false};
};

struct PeerRecord {
  NetAddr addr;
  std::atomic<std::uint64_t> last_heard_ns{0};  // steady clock (to_ns)
  std::atomic<bool> ping_in_flight{false};     // at most one per peer: a dead one holds no more
  std::chrono::steady_clock::time_point next_ping{};
  std::vector<std::shared_ptr<PeerWatchEntry>> watchers;  // under PeerLiveness::mutex_
};

// The later of the peer's last ping or answer and the watch's start: what silence counts from.
[[nodiscard]] std::chrono::steady_clock::time_point last_heard(const PeerWatchEntry& entry) noexcept;
// The shortest interval of a peer's watchers (under PeerLiveness::mutex_): how often it is pinged.
[[nodiscard]] std::chrono::milliseconds ping_interval(const PeerRecord& record) noexcept;

class PeerLiveness : public std::enable_shared_from_this<PeerLiveness> {
 public:
  PeerLiveness(std::shared_ptr<ChannelRouter> router, std::shared_ptr<ChannelEntry> channel,
               CpuSet cpus, std::chrono::milliseconds request_timeout);
  ~PeerLiveness();  // stop()s
  PeerLiveness(const PeerLiveness&) = delete;
  PeerLiveness& operator=(const PeerLiveness&) = delete;

  Result<PeerWatch> watch(const NetAddr& peer, PeerStateCallback on_change,
                          const PeerWatchOptions& options);
  void close(PeerWatchEntry& entry) noexcept;
  // A ping or an answer from `instance` arrived (the callback thread).
  void heard(std::uint64_t instance) noexcept;
  // Joins the thread; watchers are not called any more. Idempotent.
  void stop() noexcept;

 private:
  void run();
  // Pings the peers due and returns the state changes to report, outside the mutex.
  std::vector<std::pair<std::shared_ptr<PeerWatchEntry>, PeerState>> tick_locked(
      std::chrono::steady_clock::time_point now);
  std::chrono::milliseconds tick_interval_locked() const;

  std::shared_ptr<ChannelRouter> router_;
  std::shared_ptr<ChannelEntry> channel_;
  CpuSet cpus_;
  std::chrono::milliseconds request_timeout_;

  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::unordered_map<std::uint64_t, std::shared_ptr<PeerRecord>> peers_;  // by instance id
  std::thread thread_;
};

// The reserved channel's callback on every engine on channels: a ping is answered with a pong,
// and either tells `service` (when this engine watches anyone) that the sender is alive.
void answer_liveness(ChannelRouter& router, ChannelEntry& channel, const ChannelMessage& message,
                     const std::shared_ptr<PeerLiveness>& service);

}  // namespace fabric::engine
