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

 private:
  std::atomic<int> state_{0};
  Status status_;
  detail::WakeWord wake_;  // a waiter past its polling sleeps here
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
