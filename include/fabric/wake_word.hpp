#pragma once
// What a thread waiting for a completion sleeps on once spinning and yielding have not been
// enough, and what the completing thread wakes. Before it, a long wait polled in 20 us sleeps:
// 50 000 wake-ups a second per waiter, CPU that a 2-CPU host took from the threads that move
// the bytes. A completion with nobody asleep costs one atomic read-modify-write (Linux futex).
//
// Part of CompletionFlag, CompletionCounter and ImmCounter; not used on its own.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace fabric::detail {

class WakeWord {
 public:
  // The completing side, after it published its change: wakes every sleeper, if any.
  void notify() noexcept {
    // A read-modify-write, like the sleeper's registration, on the same word: whichever comes
    // second sees the first. If this one does, it wakes the sleeper; if the sleeper's does, it
    // acquires this release and its re-check of the state sees the change. (Fences would do on
    // the hardware, but ThreadSanitizer does not model them.)
    if (sleepers_.fetch_add(0, std::memory_order_acq_rel) != 0) wake_all();
  }

  // The waiting side, once polling has lasted long enough: sleeps until notify(), the
  // deadline or a spurious wake-up, unless done() holds when checked after registering as a
  // sleeper. Whether done() held.
  template <typename Pred>
  bool sleep(std::chrono::steady_clock::time_point deadline, Pred&& done) const {
    sleepers_.fetch_add(1, std::memory_order_acq_rel);
    // Acquire: a wake-up seen here comes with the state change made before it.
    const std::uint32_t seen = word_.load(std::memory_order_acquire);
    const bool now_done = done();
    if (!now_done) sleep_on(seen, deadline);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    return now_done;
  }

 private:
  void wake_all() noexcept;
  void sleep_on(std::uint32_t seen, std::chrono::steady_clock::time_point deadline) const;

  mutable std::atomic<std::uint32_t> sleepers_{0};
  mutable std::atomic<std::uint32_t> word_{0};
};

}  // namespace fabric::detail
