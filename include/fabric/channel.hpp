#pragma once
// Named channels on one engine (TransferEngine::channel, docs/api.md "Channels"): the workloads
// sharing an engine each send and receive on their own channel, and every received message says
// which engine sent it, so a workload can answer without framing of its own.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "fabric/completion.hpp"
#include "fabric/net_addr.hpp"
#include "fabric/status.hpp"

namespace fabric {

namespace engine {
class ChannelRouter;
struct ChannelEntry;
}  // namespace engine

// One received message, valid only during the callback: `data` points into a receive buffer
// that is posted again when the callback returns, `sender` into the engine's table of peers.
struct ChannelMessage {
  std::string_view channel;          // the name it was sent to
  const NetAddr& sender;             // the sending engine: channel.send(sender, ...) answers it
  std::span<const std::byte> data;   // the payload, without the channel header
};

// Runs on the engine's callback thread, one message at a time across all channels.
using ChannelCallback = std::function<void(const ChannelMessage& message)>;

struct ChannelOptions {
  // Largest payload this channel sends; 0: the most the engine's max_message_size leaves after
  // the channel header (Channel::max_message_size says how much that is).
  std::size_t max_message_size = 0;
};

// The channel id on the wire: FNV-1a (64-bit) of the name, the same on every engine, so peers
// agree on it without negotiating.
[[nodiscard]] std::uint64_t channel_id(std::string_view name) noexcept;

// An open channel: move-only, closed (its name free again, its callback never called after)
// when destroyed or close()d, also after its engine stopped.
class Channel {
 public:
  Channel() = default;
  ~Channel();
  Channel(Channel&& other) noexcept;
  Channel& operator=(Channel&& other) noexcept;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  [[nodiscard]] bool is_open() const noexcept;
  [[nodiscard]] const std::string& name() const noexcept;
  [[nodiscard]] std::uint64_t id() const noexcept;
  // Largest payload send() takes.
  [[nodiscard]] std::size_t max_message_size() const noexcept;

  // As TransferEngine::submit_send, to the channel of the same name on `to`. invalid_argument
  // naming the channel when the payload exceeds max_message_size() or what `to` receives, or
  // when the channel is closed; shutdown once the engine stopped.
  Status send(const NetAddr& to, std::span<const std::byte> message, OnDone on_done);

  // Idempotent. Waits for a callback of this channel running on the callback thread (unless
  // called from that callback); messages arriving later are counted as unrouted and dropped.
  void close() noexcept;

 private:
  friend class engine::ChannelRouter;
  Channel(std::shared_ptr<engine::ChannelRouter> router,
          std::shared_ptr<engine::ChannelEntry> entry);

  std::shared_ptr<engine::ChannelRouter> router_;
  std::shared_ptr<engine::ChannelEntry> entry_;
};

}  // namespace fabric
