#pragma once
// Where the worker thread sleeps when idle: in ppoll() on an eventfd that wake() writes, and on
// the Domains' wait fds (tcp's CQ fd turns readable when a socket gets bytes). A condition
// variable could only be woken by us: a target whose worker slept on one left inbound tcp bytes
// unread for up to idle_sleep while the sender's window filled (docs/benchmarks.md, "The target
// slept through inbound bytes").

#include <poll.h>

#include <atomic>
#include <chrono>
#include <span>
#include <vector>

#include "common/unique_fd.hpp"
#include "fabric/status.hpp"

namespace fabric::engine {

class Sleeper {
 public:
  Sleeper();
  Sleeper(const Sleeper&) = delete;
  Sleeper& operator=(const Sleeper&) = delete;

  // Why the eventfd could not be made (then the worker does not start); ok otherwise.
  [[nodiscard]] Status status() const;
  // Also wake at bytes on these fds (the Domains' wait fds; negative ones are skipped). Set once,
  // on the worker thread, before its first sleep.
  void watch(std::span<const int> fds);

  // Sleeps until wake(), readiness of a watched fd (when `with_watched`), or `limit`, unless
  // `has_work()` already holds once this thread is marked asleep. Callers of wake() that find
  // it asleep write the eventfd; those that come earlier are seen by has_work().
  template <typename HasWork>
  void sleep_for(std::chrono::microseconds limit, bool with_watched, HasWork&& has_work) {
    sleeping_.store(true, std::memory_order_seq_cst);
    // Pairs with the fence in wake(): either it sees sleeping_, or we see its work.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!has_work()) wait(limit, with_watched);
    sleeping_.store(false, std::memory_order_relaxed);
  }
  // After publishing work: wakes the sleeper if it sleeps, at the cost of one write() then.
  void wake() noexcept;
  // Wakes it whatever it is doing now, so that its next sleep returns at once too (stop).
  void wake_always() noexcept;

 private:
  void wait(std::chrono::microseconds limit, bool with_watched) noexcept;

  UniqueFd event_;
  int error_ = 0;
  std::atomic<bool> sleeping_{false};
  std::vector<pollfd> fds_;  // [0] the eventfd, then the watched ones
};

}  // namespace fabric::engine
