#pragma once
// The engine's channels (fabric/channel.hpp): the table of open channels, the one routed
// receive pool they share and the peers it has heard from. One pool rather than one per
// channel because a SEND lands in whichever buffer is posted next, whatever it carries: the
// header says where it goes, and routing it is a hash lookup on the callback thread.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fabric/channel.hpp"
#include "fabric/engine.hpp"

namespace fabric::engine {

class PeerLiveness;

struct ChannelEntry {
  std::string name;
  std::uint64_t id = 0;
  std::size_t max_payload = 0;
  std::vector<std::byte> prefix;  // channel_prefix(): header and this engine's address
  ChannelCallback on_message;
  // Held while on_message runs, so close() can wait for it.
  std::mutex callback_mutex;
  std::atomic<bool> closed{false};
};

class ChannelRouter : public std::enable_shared_from_this<ChannelRouter> {
 public:
  explicit ChannelRouter(TransferEngine::Impl& impl) : impl_(&impl) {}
  ChannelRouter(const ChannelRouter&) = delete;
  ChannelRouter& operator=(const ChannelRouter&) = delete;

  Result<Channel> open(std::string name, ChannelCallback on_message, const ChannelOptions& options);
  Status send(ChannelEntry& entry, const NetAddr& to, std::span<const std::byte> message,
              OnDone on_done);
  void close(ChannelEntry& entry) noexcept;
  // A message of the routed pool, on the callback thread.
  void dispatch(std::span<const std::byte> bytes);
  // The engine stops: sends fail with shutdown from now on, also once it is gone.
  void detach() noexcept;
  // The reserved channel "fabric.liveness" (peer_liveness.hpp), open with the routed pool, which
  // this posts if no channel has yet: invalid_argument on an engine with submit_recvs pools.
  Result<std::shared_ptr<ChannelEntry>> liveness_channel();
  // Where answered pings and pongs report who was heard: the engine's PeerLiveness, once made.
  void set_liveness(std::weak_ptr<PeerLiveness> service);
  // Messages dropped: for no open channel, or not channel-framed (EngineMetrics).
  [[nodiscard]] std::uint64_t unrouted() const noexcept {
    return unrouted_.load(std::memory_order_relaxed);
  }

 private:
  Result<std::shared_ptr<ChannelEntry>> make_entry(std::string name, ChannelCallback on_message,
                                                   const ChannelOptions& options);
  Status post_pool_locked();
  const NetAddr* sender_of(std::uint64_t instance, std::span<const std::byte> address);
  void drop(std::uint64_t channel, const char* why);

  std::shared_mutex engine_mutex_;  // guards impl_ against detach()
  TransferEngine::Impl* impl_;

  std::mutex table_mutex_;
  std::unordered_map<std::uint64_t, std::shared_ptr<ChannelEntry>> channels_;
  bool pool_posted_ = false;
  std::shared_ptr<ChannelEntry> liveness_entry_;  // in channels_ once the pool is posted

  std::mutex liveness_mutex_;
  std::weak_ptr<PeerLiveness> liveness_;

  // Callback thread only: decoded senders by instance id, channel ids already logged.
  std::unordered_map<std::uint64_t, NetAddr> peers_;
  std::unordered_set<std::uint64_t> logged_;
  std::atomic<std::uint64_t> unrouted_{0};
};

}  // namespace fabric::engine
