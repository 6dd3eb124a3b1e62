#include "fabric/completion.hpp"

#include "core/blocking_wait.hpp"

namespace fabric {

void CompletionFlag::complete(Status status) {
  status_ = std::move(status);
  state_.store(1, std::memory_order_release);
  // The flag must outlive this call, as the engine's shared owner makes sure (OnDone).
  wake_.notify();
  // After the state: a notified waiter reads the status. Whoever moves the state second (this,
  // or notify_on_complete) runs the notifier, so it runs exactly once.
  if (notifier_state_.exchange(kNotifierFired, std::memory_order_acq_rel) == kNotifierSet) {
    notifier_->notify();
  }
}

bool CompletionFlag::notify_on_complete(std::shared_ptr<CompletionNotifier> notifier) {
  if (!notifier || notifier_state_.load(std::memory_order_acquire) == kNotifierSet) return false;
  if (notifier_state_.load(std::memory_order_acquire) == kNotifierFired) {
    notifier->notify();
    return true;
  }
  notifier_ = std::move(notifier);
  int expected = kNoNotifier;
  if (notifier_state_.compare_exchange_strong(expected, kNotifierSet, std::memory_order_acq_rel)) {
    return true;
  }
  // complete() ran between the load and here: it saw no notifier, so this thread runs it.
  notifier_->notify();
  return true;
}

Status CompletionFlag::status() const {
  if (!done()) return {Errc::again, "not completed yet"};
  return status_;
}

Status CompletionFlag::wait(std::chrono::nanoseconds timeout) const {
  const bool reached = detail::wait_blocking(wake_, timeout, [this] { return done(); });
  if (!reached) return {Errc::timeout, "completion flag not set within the timeout"};
  return status_;
}

void CompletionCounter::complete(const Status& status) {
  if (status.ok()) {
    ok_.fetch_add(1, std::memory_order_acq_rel);
    wake_.notify();
    return;
  }
  {
    std::lock_guard lock(error_mutex_);
    if (first_error_.ok()) first_error_ = status;
  }
  failed_.fetch_add(1, std::memory_order_acq_rel);
  wake_.notify();
}

Status CompletionCounter::first_error() const {
  std::lock_guard lock(error_mutex_);
  return first_error_;
}

Status CompletionCounter::wait(std::uint64_t n, std::chrono::nanoseconds timeout) const {
  const bool reached = detail::wait_blocking(wake_, timeout, [&] { return completed() >= n; });
  if (failed() > 0) return first_error();
  if (!reached) {
    return {Errc::timeout, "completion counter did not reach the target within the timeout"};
  }
  return Status::success();
}

void OnDone::deliver(const Status& status) {
  std::visit(
      [&](auto& target) {
        using T = std::decay_t<decltype(target)>;
        if constexpr (std::is_same_v<T, DoneCallback>) {
          if (target) target(status);
        } else if constexpr (!std::is_same_v<T, std::monostate>) {
          if (target) target->complete(status);
        }
      },
      target_);
}

}  // namespace fabric
