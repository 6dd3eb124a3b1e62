#pragma once
// What the Sender and Receiver share: the engine's channel "kv" (fabric/channel.hpp) decoded into
// KV messages, sends on it, the engine's liveness of their peers (watch), and a ticker thread
// that judges silence and drives deadlines. Owners keep their own peer tables. Other workloads
// on the engine receive on channels of their own.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "fabric/engine.hpp"
#include "fabric/kv/state.hpp"
#include "messages.hpp"

namespace fabric::kv {

using Clock = std::chrono::steady_clock;

class Link {
 public:
  using OnMessage = std::function<void(msg::Message&&)>;
  using OnTick = std::function<void(Clock::time_point)>;

  Link(TransferEngine& engine, Liveness liveness);
  ~Link();  // stop()s
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // Opens the channel "kv" (messages go to on_message on the engine's callback thread; a
  // malformed one is logged and dropped) and starts the ticker (on_tick every tick()). A second
  // Link on one engine fails here: the channel is open already.
  // Both callbacks must stay valid until stop().
  Status start(OnMessage on_message, OnTick on_tick);
  // start() with callbacks into owner->on_message / owner->on_tick that do nothing once the
  // owner is gone (the engine keeps its receive callback until it stops).
  template <typename Owner>
  Status start_for(const std::shared_ptr<Owner>& owner) {
    std::weak_ptr<Owner> weak = owner;
    return start(
        [weak](msg::Message&& m) {
          if (auto self = weak.lock()) self->on_message(std::move(m));
        },
        [weak](Clock::time_point now) {
          if (auto self = weak.lock()) self->on_tick(now);
        });
  }
  void stop();
  // Wakes the ticker now (work that must not wait for the next tick).
  void wake();

  // SENDs body to `to`; on_sent (optional) gets the engine's result, on the callback thread.
  Status send(const NetAddr& to, const msg::Body& body,
              std::function<void(const Status&)> on_sent = {});

  // The engine's liveness of `peer` (watch_peer) at this side's heartbeat interval and
  // dead_after(); PeerLife::last_heard() reads it. Verdicts are the owner's, at its ticks.
  Result<PeerWatch> watch(const NetAddr& peer);

  [[nodiscard]] TransferEngine& engine() noexcept { return engine_; }
  [[nodiscard]] std::uint64_t self_instance() const noexcept;
  [[nodiscard]] std::chrono::milliseconds heartbeat_interval() const noexcept {
    return liveness_.heartbeat_interval;
  }
  // A peer silent this long is dead: 2 heartbeat intervals + the engine's request_timeout.
  [[nodiscard]] std::chrono::milliseconds dead_after() const noexcept;
  // How often the ticker runs: a quarter interval, so deadlines are met within that.
  [[nodiscard]] std::chrono::milliseconds tick() const noexcept;

 private:
  void run();

  TransferEngine& engine_;
  Liveness liveness_;
  // Shared with the receive callback, which the engine keeps until it stops.
  struct Inbox {
    std::mutex mutex;
    OnMessage on_message;
  };
  std::shared_ptr<Inbox> inbox_ = std::make_shared<Inbox>();
  Channel channel_;
  OnTick on_tick_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool woken_ = false;
  std::thread thread_;
};

}  // namespace fabric::kv
