#pragma once
// A group's receive buffers (submit_recvs): pools registered on Domain 0, posted there, handed
// to the callback thread without a copy when a SEND lands and posted again once the callback
// returns. Worker-thread only, except that the callback thread asks for the re-post.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "engine/callback_thread.hpp"
#include "engine/domain_group.hpp"
#include "engine/recv_pool.hpp"

namespace fabric::engine {

class Receives {
 public:
  // Runs on the callback thread: queues post(slot) on the worker (Domains are single-threaded).
  using Repost = std::function<void(RecvSlot* slot)>;

  Receives(DomainGroup& domains, CallbackThread& callbacks, Repost repost)
      : domains_(domains), callbacks_(callbacks), repost_(std::move(repost)) {}
  Receives(const Receives&) = delete;
  Receives& operator=(const Receives&) = delete;

  Status add_pool(std::size_t buffer_size, std::uint32_t count, RecvCallback on_recv);
  // A receive completed on Domain 0.
  void arrived(RecvSlot* slot, std::size_t length, const Status& status);
  void post(RecvSlot* slot);
  // Posts again what the provider refused (back-pressure) earlier.
  void retry_unposted();
  // Messages handed to receive callbacks so far (EngineMetrics::messages_received).
  [[nodiscard]] std::uint64_t delivered() const noexcept {
    return delivered_.load(std::memory_order_relaxed);
  }
  // stop(): nothing is posted any more.
  void stop_posting() noexcept { stopped_ = true; }

 private:
  DomainGroup& domains_;
  CallbackThread& callbacks_;
  Repost repost_;
  std::vector<std::unique_ptr<RecvPool>> pools_;
  std::deque<RecvSlot*> unposted_;
  bool stopped_ = false;
  std::atomic<std::uint64_t> delivered_{0};
};

}  // namespace fabric::engine
