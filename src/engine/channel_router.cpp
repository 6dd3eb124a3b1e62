#include "engine/channel_router.hpp"

#include <fmt/format.h>

#include "common/log.hpp"
#include "engine/channel_frame.hpp"
#include "engine/engine_impl.hpp"
#include "engine/peer_liveness.hpp"

namespace fabric::engine {

namespace {

// Senders remembered at once; a table this full is cleared rather than grown (a peer that
// restarts comes back with a new instance id, and churn must not grow it forever).
constexpr std::size_t kMaxPeers = 4096;
constexpr std::size_t kMaxLoggedChannels = 256;

// Which ChannelEntry's callback runs on this thread, so close() from inside it does not wait
// for itself.
thread_local const ChannelEntry* t_running = nullptr;

}  // namespace

Result<Channel> ChannelRouter::open(std::string name, ChannelCallback on_message,
                                    const ChannelOptions& options) {
  if (name.empty()) return Status{Errc::invalid_argument, "a channel needs a name"};
  if (name.starts_with("fabric.")) {
    return Status{Errc::invalid_argument,
                  fmt::format("channel '{}': names starting with 'fabric.' are the engine's own",
                              name)};
  }
  if (!on_message) {
    return Status{Errc::invalid_argument, fmt::format("channel '{}' needs a callback", name)};
  }
  std::shared_lock engine_lock(engine_mutex_);
  if (impl_ == nullptr) return TransferEngine::Impl::shut();
  TransferEngine::Impl::Entry gate(*impl_);
  if (!gate.open()) return TransferEngine::Impl::shut();
  auto made = make_entry(std::move(name), std::move(on_message), options);
  if (!made) return made.status();
  auto entry = std::move(made).value();

  std::lock_guard lock(table_mutex_);
  if (auto it = channels_.find(entry->id); it != channels_.end()) {
    if (it->second->name == entry->name) {
      return Status{Errc::invalid_argument,
                    fmt::format("channel '{}' is already open on this engine", entry->name)};
    }
    return Status{Errc::invalid_argument,
                  fmt::format("channel '{}' has the id of channel '{}', open on this engine "
                              "(channel_id collision): pick another name",
                              entry->name, it->second->name)};
  }
  if (!pool_posted_) {
    if (auto st = post_pool_locked(); !st.ok()) return st;
  }
  channels_.emplace(entry->id, entry);
  log::debug("channel '{}' open (id {:#018x})", entry->name, entry->id);
  return Channel(shared_from_this(), std::move(entry));
}

// Under engine_mutex_ (shared), with impl_ set.
Result<std::shared_ptr<ChannelEntry>> ChannelRouter::make_entry(std::string name,
                                                                ChannelCallback on_message,
                                                                const ChannelOptions& options) {
  TransferEngine::Impl& impl = *impl_;
  auto entry = std::make_shared<ChannelEntry>();
  entry->name = std::move(name);
  entry->id = channel_id(entry->name);
  entry->prefix = channel_prefix(entry->id, impl.address);
  const std::size_t room = impl.config.max_message_size > entry->prefix.size()
                               ? impl.config.max_message_size - entry->prefix.size()
                               : 0;
  if (room == 0) {
    return Status{Errc::invalid_argument,
                  fmt::format("channel '{}': max_message_size {} leaves no room after the {}-byte "
                              "channel header",
                              entry->name, impl.config.max_message_size, entry->prefix.size())};
  }
  if (options.max_message_size > room) {
    return Status{Errc::invalid_argument,
                  fmt::format("channel '{}': max_message_size {} exceeds the {} bytes the "
                              "engine's max_message_size {} leaves after the {}-byte header",
                              entry->name, options.max_message_size, room,
                              impl.config.max_message_size, entry->prefix.size())};
  }
  entry->max_payload = options.max_message_size != 0 ? options.max_message_size : room;
  entry->on_message = std::move(on_message);
  return entry;
}

Result<std::shared_ptr<ChannelEntry>> ChannelRouter::liveness_channel() {
  std::shared_lock engine_lock(engine_mutex_);
  if (impl_ == nullptr) return TransferEngine::Impl::shut();
  std::lock_guard lock(table_mutex_);
  if (!pool_posted_) {
    if (auto st = post_pool_locked(); !st.ok()) return st;
  }
  return liveness_entry_;
}

void ChannelRouter::set_liveness(std::weak_ptr<PeerLiveness> service) {
  std::lock_guard lock(liveness_mutex_);
  liveness_ = std::move(service);
}

// The routed pool, posted with the first channel. Raw submit_recvs pools would take channel
// messages (and this pool theirs), so an engine has one kind or the other.
Status ChannelRouter::post_pool_locked() {
  TransferEngine::Impl& impl = *impl_;
  std::uint8_t mode = kReceiveNone;
  if (!impl.receive_mode.compare_exchange_strong(mode, kReceiveChannels) &&
      mode != kReceiveChannels) {
    return {Errc::invalid_argument,
            "this engine receives through submit_recvs pools, which would take channel messages "
            "without routing them: an engine receives either raw (submit_recvs) or on channels"};
  }
  auto* worker = &impl.group0();
  const std::size_t len = impl.config.max_message_size;
  const std::uint32_t count = impl.config.channel_recv_buffers;
  if (count == 0) return {Errc::invalid_argument, "EngineConfig::channel_recv_buffers is 0"};
  auto posted = worker->call<bool>(
      [worker, len, count, self = shared_from_this()]() -> Result<bool> {
        auto st = worker->receives().add_pool(
            len, count, [self](std::span<const std::byte> bytes) { self->dispatch(bytes); });
        if (!st.ok()) return st;
        return true;
      },
      impl.config.control_timeout);
  if (!posted) return posted.status();
  pool_posted_ = true;
  // Every engine on channels answers pings, so a peer is watched without a watcher of its own.
  auto entry = make_entry(kLivenessChannel,
                          [weak = weak_from_this()](const ChannelMessage& message) {
                            auto self = weak.lock();
                            if (!self) return;
                            std::shared_ptr<PeerLiveness> service;
                            {
                              std::lock_guard lock(self->liveness_mutex_);
                              service = self->liveness_.lock();
                            }
                            answer_liveness(*self, *self->liveness_entry_, message, service);
                          },
                          {});
  if (!entry) return entry.status();
  liveness_entry_ = std::move(entry).value();
  channels_.emplace(liveness_entry_->id, liveness_entry_);
  return Status::success();
}

Status ChannelRouter::send(ChannelEntry& entry, const NetAddr& to,
                           std::span<const std::byte> message, OnDone on_done) {
  if (entry.closed.load(std::memory_order_acquire)) {
    return {Errc::invalid_argument, fmt::format("channel '{}' is closed", entry.name)};
  }
  if (message.size() > entry.max_payload) {
    return {Errc::invalid_argument,
            fmt::format("channel '{}': message of {} bytes exceeds the channel's "
                        "max_message_size of {} bytes",
                        entry.name, message.size(), entry.max_payload)};
  }
  const std::size_t framed = entry.prefix.size() + message.size();
  std::shared_lock engine_lock(engine_mutex_);
  if (impl_ == nullptr) return TransferEngine::Impl::shut();
  TransferEngine::Impl& impl = *impl_;
  return impl.submit(
      OpKind::send, PostKind::send, on_done,
      [&]() -> Status {
        if (auto st = check_peer(to, impl.identity); !st.ok()) return st;
        if (framed > to.max_message_size()) {
          return {Errc::invalid_argument,
                  fmt::format("channel '{}': message of {} bytes and its {}-byte header exceed "
                              "the receiver's buffer size of {} bytes",
                              entry.name, message.size(), entry.prefix.size(),
                              to.max_message_size())};
        }
        return Status::success();
      },
      [&]() -> Worker& { return impl.group0(); },
      [&](Op& op) {
        // Into the pooled Op's storage, header then payload: no allocation once it has held a
        // message this long, and the one copy an unaddressed SEND makes too.
        op.send.to = to;
        op.send.message.assign(entry.prefix.begin(), entry.prefix.end());
        op.send.message.insert(op.send.message.end(), message.begin(), message.end());
        return Status::success();
      });
}

void ChannelRouter::close(ChannelEntry& entry) noexcept {
  {
    std::lock_guard lock(table_mutex_);
    auto it = channels_.find(entry.id);
    if (it != channels_.end() && it->second.get() == &entry) channels_.erase(it);
  }
  if (t_running == &entry) {
    // Inside its own callback, which holds callback_mutex: it returns to dispatch() next.
    entry.closed.store(true, std::memory_order_release);
    return;
  }
  std::lock_guard wait_for_callback(entry.callback_mutex);
  entry.closed.store(true, std::memory_order_release);
  entry.on_message = nullptr;  // what it captured goes now, not when the last handle does
}

void ChannelRouter::dispatch(std::span<const std::byte> bytes) {
  const auto frame = parse_channel_frame(bytes);
  if (!frame) {
    drop(0, "is not a channel message (a peer sending with submit_send?)");
    return;
  }
  const NetAddr* sender = sender_of(frame->sender, frame->sender_address);
  if (sender == nullptr) {
    drop(frame->channel, "carries a sender address that does not decode");
    return;
  }
  std::shared_ptr<ChannelEntry> entry;
  {
    std::lock_guard lock(table_mutex_);
    if (auto it = channels_.find(frame->channel); it != channels_.end()) entry = it->second;
  }
  if (!entry) {
    drop(frame->channel, "is for a channel not open on this engine");
    return;
  }
  std::lock_guard running(entry->callback_mutex);
  if (entry->closed.load(std::memory_order_acquire)) {
    drop(frame->channel, "is for a channel closed on this engine");
    return;
  }
  t_running = entry.get();
  try {
    entry->on_message(ChannelMessage{entry->name, *sender, frame->payload});
  } catch (const std::exception& e) {
    log::error("channel '{}': receive callback threw: {}", entry->name, e.what());
  } catch (...) {
    log::error("channel '{}': receive callback threw", entry->name);
  }
  t_running = nullptr;
}

const NetAddr* ChannelRouter::sender_of(std::uint64_t instance,
                                        std::span<const std::byte> address) {
  if (auto it = peers_.find(instance); it != peers_.end()) return &it->second;
  auto decoded = NetAddr::decode(address);
  if (!decoded || decoded->instance_id() != instance) return nullptr;
  if (peers_.size() >= kMaxPeers) peers_.clear();
  return &peers_.emplace(instance, std::move(decoded).value()).first->second;
}

void ChannelRouter::drop(std::uint64_t channel, const char* why) {
  unrouted_.fetch_add(1, std::memory_order_relaxed);
  // One line per channel id, not one per message: a peer talking to a closed channel must not
  // flood the log.
  if (logged_.size() >= kMaxLoggedChannels || !logged_.insert(channel).second) return;
  log::warn("dropped a message that {} (channel id {:#018x}); counted in messages_unrouted", why,
            channel);
}

void ChannelRouter::detach() noexcept {
  std::unique_lock lock(engine_mutex_);
  impl_ = nullptr;
}

}  // namespace fabric::engine

namespace fabric {

Channel::Channel(std::shared_ptr<engine::ChannelRouter> router,
                 std::shared_ptr<engine::ChannelEntry> entry)
    : router_(std::move(router)), entry_(std::move(entry)) {}

Channel::~Channel() { close(); }

Channel::Channel(Channel&& other) noexcept
    : router_(std::move(other.router_)), entry_(std::move(other.entry_)) {}

Channel& Channel::operator=(Channel&& other) noexcept {
  if (this != &other) {
    close();
    router_ = std::move(other.router_);
    entry_ = std::move(other.entry_);
  }
  return *this;
}

bool Channel::is_open() const noexcept {
  return entry_ && !entry_->closed.load(std::memory_order_acquire);
}

const std::string& Channel::name() const noexcept {
  static const std::string none;
  return entry_ ? entry_->name : none;
}

std::uint64_t Channel::id() const noexcept { return entry_ ? entry_->id : 0; }

std::size_t Channel::max_message_size() const noexcept {
  return entry_ ? entry_->max_payload : 0;
}

Status Channel::send(const NetAddr& to, std::span<const std::byte> message, OnDone on_done) {
  if (!entry_) return {Errc::invalid_argument, "send on a channel that was never opened"};
  return router_->send(*entry_, to, message, std::move(on_done));
}

void Channel::close() noexcept {
  // The entry stays for name() and for send()'s "closed" error; the router drops its callback.
  if (entry_ && !entry_->closed.load(std::memory_order_acquire)) router_->close(*entry_);
}

Result<Channel> TransferEngine::channel(std::string name, ChannelCallback on_message,
                                        const ChannelOptions& options) {
  return impl_->channels->open(std::move(name), std::move(on_message), options);
}

}  // namespace fabric
