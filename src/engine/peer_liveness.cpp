#include "engine/peer_liveness.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/log.hpp"
#include "engine/channel_router.hpp"
#include "engine/steady_ns.hpp"
#include "fabric/threads.hpp"

namespace fabric::engine {

namespace {

using Clock = std::chrono::steady_clock;

// The reserved channel's payloads: one byte each.
constexpr std::byte kPing{1};
constexpr std::byte kPong{2};

// Which watch's callback runs on this thread, so close() from inside it does not wait for itself.
thread_local const PeerWatchEntry* t_calling = nullptr;

}  // namespace

Clock::time_point last_heard(const PeerWatchEntry& entry) noexcept {
  return std::max(from_ns(entry.peer->last_heard_ns.load(std::memory_order_relaxed)), entry.began);
}

std::chrono::milliseconds ping_interval(const PeerRecord& record) noexcept {
  auto interval = std::chrono::milliseconds::max();
  for (const auto& w : record.watchers) interval = std::min(interval, w->interval);
  return interval;
}

PeerLiveness::PeerLiveness(std::shared_ptr<ChannelRouter> router,
                           std::shared_ptr<ChannelEntry> channel, CpuSet cpus,
                           std::chrono::milliseconds request_timeout)
    : router_(std::move(router)),
      channel_(std::move(channel)),
      cpus_(std::move(cpus)),
      request_timeout_(request_timeout) {}

PeerLiveness::~PeerLiveness() { stop(); }

Result<PeerWatch> PeerLiveness::watch(const NetAddr& peer, PeerStateCallback on_change,
                                      const PeerWatchOptions& options) {
  if (!on_change) return Status{Errc::invalid_argument, "watch_peer needs a callback"};
  if (options.interval.count() <= 0) {
    return Status{Errc::invalid_argument,
                  fmt::format("watch_peer: the ping interval must be positive, not {} ms",
                              options.interval.count())};
  }
  if (options.silent_after.count() < 0) {
    return Status{Errc::invalid_argument, "watch_peer: silent_after must not be negative"};
  }
  auto entry = std::make_shared<PeerWatchEntry>();
  entry->interval = options.interval;
  entry->silent_after = options.silent_after.count() != 0
                            ? options.silent_after
                            : 2 * options.interval + request_timeout_;
  entry->on_change = std::move(on_change);
  entry->began = Clock::now();
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return Status{Errc::shutdown, "the engine is stopping"};
    auto& record = peers_[peer.instance_id()];
    if (!record) {
      record = std::make_shared<PeerRecord>();
      record->addr = peer;
      record->last_heard_ns.store(to_ns(entry->began),
                                  std::memory_order_relaxed);
      record->next_ping = entry->began;  // the first ping goes at the next tick
    }
    entry->peer = record;
    record->watchers.push_back(entry);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  cv_.notify_all();  // the tick may need to be shorter now
  return PeerWatch(shared_from_this(), std::move(entry));
}

void PeerLiveness::close(PeerWatchEntry& entry) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (auto it = peers_.find(entry.peer->addr.instance_id());
        it != peers_.end() && it->second == entry.peer) {
      auto& w = it->second->watchers;
      w.erase(std::remove_if(w.begin(), w.end(), [&](const auto& e) { return e.get() == &entry; }),
              w.end());
      if (w.empty()) peers_.erase(it);  // no one watches it: no more pings
    }
  }
  if (t_calling == &entry) {
    entry.closed.store(true, std::memory_order_release);
    return;
  }
  std::lock_guard wait_for_callback(entry.callback_mutex);
  entry.closed.store(true, std::memory_order_release);
  entry.on_change = nullptr;
}

void PeerLiveness::heard(std::uint64_t instance) noexcept {
  std::lock_guard lock(mutex_);
  if (auto it = peers_.find(instance); it != peers_.end()) {
    it->second->last_heard_ns.store(now_ns(), std::memory_order_relaxed);
  }
}

void PeerLiveness::stop() noexcept {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

std::chrono::milliseconds PeerLiveness::tick_interval_locked() const {
  // A quarter of the shortest interval asked for: pings and verdicts are on time within that.
  auto shortest = std::chrono::milliseconds(1000);
  for (const auto& [instance, record] : peers_) shortest = std::min(shortest, ping_interval(*record));
  return std::max(std::chrono::milliseconds(1), shortest / 4);
}

std::vector<std::pair<std::shared_ptr<PeerWatchEntry>, PeerState>> PeerLiveness::tick_locked(
    Clock::time_point now) {
  std::vector<std::pair<std::shared_ptr<PeerWatchEntry>, PeerState>> changes;
  for (auto& [instance, record] : peers_) {
    for (const auto& w : record->watchers) {
      const auto since = now - last_heard(*w);
      const PeerState state = since > w->silent_after ? PeerState::silent : PeerState::alive;
      if (state != w->state.load(std::memory_order_relaxed)) {
        w->state.store(state, std::memory_order_relaxed);
        changes.emplace_back(w, state);
      }
    }
    if (now < record->next_ping || record->ping_in_flight.load(std::memory_order_acquire)) continue;
    record->next_ping = now + ping_interval(*record);
    record->ping_in_flight.store(true, std::memory_order_release);
    std::weak_ptr<PeerRecord> weak = record;
    const auto st = router_->send(*channel_, record->addr, std::span(&kPing, 1),
                                  OnDone([weak](const Status&) {
                                    if (auto r = weak.lock()) {
                                      r->ping_in_flight.store(false, std::memory_order_release);
                                    }
                                  }));
    if (!st.ok()) {
      // Not submitted (back-pressure, a stopping engine): the next tick tries again.
      record->ping_in_flight.store(false, std::memory_order_release);
    }
  }
  return changes;
}

void PeerLiveness::run() {
  const PlacedThread placed("fabric-live", cpus_);
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    auto changes = tick_locked(Clock::now());
    lock.unlock();
    for (auto& [w, state] : changes) {
      std::lock_guard calling(w->callback_mutex);
      if (w->closed.load(std::memory_order_acquire) || !w->on_change) continue;
      t_calling = w.get();
      try {
        w->on_change(w->peer->addr, state);
      } catch (const std::exception& e) {
        log::error("peer watch of {}: callback threw: {}", w->peer->addr.describe(), e.what());
      } catch (...) {
        log::error("peer watch of {}: callback threw", w->peer->addr.describe());
      }
      t_calling = nullptr;
    }
    changes.clear();  // what the callbacks captured goes outside the mutex
    lock.lock();
    cv_.wait_for(lock, tick_interval_locked(), [this] { return stopping_; });
  }
}

void answer_liveness(ChannelRouter& router, ChannelEntry& channel, const ChannelMessage& message,
                     const std::shared_ptr<PeerLiveness>& service) {
  if (message.data.size() != 1 || (message.data[0] != kPing && message.data[0] != kPong)) return;
  if (message.data[0] == kPing) {
    // Best effort: a lost pong is one missed beat, and the pinger counts silence, not pongs.
    (void)router.send(channel, message.sender, std::span(&kPong, 1), OnDone());
  }
  if (service) service->heard(message.sender.instance_id());
}

}  // namespace fabric::engine

namespace fabric {

PeerWatch::PeerWatch(std::shared_ptr<engine::PeerLiveness> service,
                     std::shared_ptr<engine::PeerWatchEntry> entry)
    : service_(std::move(service)), entry_(std::move(entry)) {}

PeerWatch::~PeerWatch() { close(); }

PeerWatch::PeerWatch(PeerWatch&& other) noexcept
    : service_(std::move(other.service_)), entry_(std::move(other.entry_)) {}

PeerWatch& PeerWatch::operator=(PeerWatch&& other) noexcept {
  if (this != &other) {
    close();
    service_ = std::move(other.service_);
    entry_ = std::move(other.entry_);
  }
  return *this;
}

bool PeerWatch::is_open() const noexcept {
  return entry_ && !entry_->closed.load(std::memory_order_acquire);
}

PeerState PeerWatch::state() const noexcept {
  return entry_ ? entry_->state.load(std::memory_order_relaxed) : PeerState::silent;
}

std::chrono::steady_clock::time_point PeerWatch::last_heard() const noexcept {
  return entry_ ? engine::last_heard(*entry_) : std::chrono::steady_clock::time_point{};
}

std::chrono::milliseconds PeerWatch::silent_after() const noexcept {
  return entry_ ? entry_->silent_after : std::chrono::milliseconds(0);
}

void PeerWatch::close() noexcept {
  if (entry_ && !entry_->closed.load(std::memory_order_acquire)) service_->close(*entry_);
}

}  // namespace fabric
