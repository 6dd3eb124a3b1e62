#pragma once
// How a submission reports that it finished: a callback (on the engine's
// callback thread), a flag, or a counter the caller polls (set by the worker).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <variant>

#include "fabric/status.hpp"
#include "fabric/timeout.hpp"
#include "fabric/wake_word.hpp"

namespace fabric {

using DoneCallback = std::function<void(const Status&)>;

// Told once that a CompletionFlag completed (CompletionFlag::notify_on_complete), on the thread
// that completed it: an engine worker or the callback thread. So notify() must return at once:
// no blocking, no interpreter lock, no call into the engine. An event loop's bridge queues the
// flag and writes an eventfd (python/src/async_bridge.hpp).
class CompletionNotifier {
 public:
  virtual ~CompletionNotifier() = default;
  virtual void notify() noexcept = 0;
};

// One submission's completion, for callers that poll.
class CompletionFlag {
 public:
  [[nodiscard]] bool done() const noexcept { return state_.load(std::memory_order_acquire) != 0; }
  // Waits until done() or the timeout; returns the submission's status, or
  // Errc::timeout (the submission is still outstanding). nanoseconds::max()
  // (or any longer duration) waits without a deadline.
  [[nodiscard]] Status wait(std::chrono::nanoseconds timeout) const;
  template <typename Rep, typename Period>
  [[nodiscard]] Status wait(std::chrono::duration<Rep, Period> timeout) const {
    return wait(saturating_nanoseconds(timeout));
  }
  // The submission's status; Errc::again while not done.
  [[nodiscard]] Status status() const;

  void complete(Status status);  // engine side

  // Runs notifier->notify() once the flag completes, or at once on this thread if it already
  // has. One waiting notifier per flag: a second call before completion returns false and keeps
  // nothing (one after completion is notified at once). The flag owns
  // the notifier until it is destroyed, so one whose waiter left is still safe to call. Safe
  // against complete() on another thread; not against a second notify_on_complete at once.
  bool notify_on_complete(std::shared_ptr<CompletionNotifier> notifier);

 private:
  // notifier_state_: none, registered (notifier_ set before), or fired (complete() has run).
  enum : int { kNoNotifier = 0, kNotifierSet = 1, kNotifierFired = 2 };

  std::atomic<int> state_{0};
  Status status_;
  detail::WakeWord wake_;  // a waiter past its polling sleeps here
  std::atomic<int> notifier_state_{kNoNotifier};
  std::shared_ptr<CompletionNotifier> notifier_;  // written once, before kNotifierSet
};

// Many submissions' completions, for pipelines that count.
class CompletionCounter {
 public:
  [[nodiscard]] std::uint64_t succeeded() const noexcept {
    return ok_.load(std::memory_order_acquire);
  }
  [[nodiscard]] std::uint64_t failed() const noexcept {
    return failed_.load(std::memory_order_acquire);
  }
  [[nodiscard]] std::uint64_t completed() const noexcept { return succeeded() + failed(); }
  // Waits until completed() >= n or the timeout (Errc::timeout). If any failed,
  // returns the first failure. Durations as for CompletionFlag::wait.
  [[nodiscard]] Status wait(std::uint64_t n, std::chrono::nanoseconds timeout) const;
  template <typename Rep, typename Period>
  [[nodiscard]] Status wait(std::uint64_t n, std::chrono::duration<Rep, Period> timeout) const {
    return wait(n, saturating_nanoseconds(timeout));
  }
  [[nodiscard]] Status first_error() const;

  void complete(const Status& status);  // engine side

 private:
  std::atomic<std::uint64_t> ok_{0};
  std::atomic<std::uint64_t> failed_{0};
  mutable std::mutex error_mutex_;
  Status first_error_;
  detail::WakeWord wake_;  // a waiter past its polling sleeps here
};

// What a submit_* call reports to. Implicitly built from any of the three.
class OnDone {
 public:
  OnDone() = default;
  OnDone(DoneCallback callback) : target_(std::move(callback)) {}  // NOLINT
  OnDone(std::shared_ptr<CompletionFlag> flag) : target_(std::move(flag)) {}  // NOLINT
  OnDone(std::shared_ptr<CompletionCounter> counter) : target_(std::move(counter)) {}  // NOLINT

  [[nodiscard]] bool needs_callback_thread() const noexcept {
    return std::holds_alternative<DoneCallback>(target_);
  }
  // Runs the callback or sets the flag/counter. Exactly once per submission.
  void deliver(const Status& status);

 private:
  std::variant<std::monostate, DoneCallback, std::shared_ptr<CompletionFlag>,
               std::shared_ptr<CompletionCounter>>
      target_;
};

}  // namespace fabric
