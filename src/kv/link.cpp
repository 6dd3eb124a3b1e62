#include "link.hpp"

#include <spdlog/spdlog.h>

#include "fabric/threads.hpp"

namespace fabric::kv {

Link::Link(TransferEngine& engine, Liveness liveness) : engine_(engine), liveness_(liveness) {}

Link::~Link() { stop(); }

std::uint64_t Link::self_instance() const noexcept { return engine_.main_address().instance_id(); }

std::chrono::milliseconds Link::dead_after() const noexcept {
  return 2 * liveness_.heartbeat_interval + engine_.config().request_timeout;
}

std::chrono::milliseconds Link::tick() const noexcept {
  return std::max(std::chrono::milliseconds(1), liveness_.heartbeat_interval / 4);
}

Status Link::start(OnMessage on_message, OnTick on_tick) {
  if (liveness_.heartbeat_interval.count() <= 0) {
    return {Errc::invalid_argument, "KV liveness: the heartbeat interval must be positive"};
  }
  {
    std::lock_guard lock(inbox_->mutex);
    inbox_->on_message = std::move(on_message);
  }
  on_tick_ = std::move(on_tick);
  std::weak_ptr<Inbox> weak = inbox_;
  auto opened = engine_.channel("kv", [weak](const ChannelMessage& message) {
    auto inbox = weak.lock();
    if (!inbox) return;
    auto m = msg::decode(message.data);
    if (!m.ok()) {
      spdlog::warn("fabric kv: dropped a message of {} bytes: {}", message.data.size(),
                   m.status().to_string());
      return;
    }
    std::lock_guard lock(inbox->mutex);
    if (inbox->on_message) inbox->on_message(std::move(*m));
  });
  if (!opened.ok()) {
    return {opened.status().code(),
            "KV Sender/Receiver (one per engine): " + opened.status().message()};
  }
  channel_ = std::move(opened).value();
  thread_ = std::thread([this] { run(); });
  return Status::success();
}

void Link::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // After this no message reaches the owner, even if the engine lives on; the name "kv" is free
  // for the engine's next Sender or Receiver.
  channel_.close();
  std::lock_guard lock(inbox_->mutex);
  inbox_->on_message = nullptr;
}

void Link::wake() {
  {
    std::lock_guard lock(mutex_);
    woken_ = true;
  }
  cv_.notify_all();
}

Result<PeerWatch> Link::watch(const NetAddr& peer) {
  return engine_.watch_peer(
      peer, [](const NetAddr&, PeerState) {}, {liveness_.heartbeat_interval, dead_after()});
}

Status Link::send(const NetAddr& to, const msg::Body& body,
                  std::function<void(const Status&)> on_sent) {
  const auto bytes = msg::encode(self_instance(), body);
  if (on_sent) return channel_.send(to, bytes, OnDone(std::move(on_sent)));
  return channel_.send(to, bytes, OnDone());
}

void Link::run() {
  // The ticker judges silence and deadlines: it runs where the engine's threads do, never
  // on the CPU of a host thread that created the Sender or Receiver and may spin there.
  const PlacedThread placed("fabric-kv-tick", engine_.thread_cpus().cpus);
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    cv_.wait_for(lock, tick(), [this] { return stopping_ || woken_; });
    if (stopping_) break;
    woken_ = false;
    lock.unlock();
    on_tick_(Clock::now());
    lock.lock();
  }
}

}  // namespace fabric::kv
