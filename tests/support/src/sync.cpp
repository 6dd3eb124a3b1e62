#include "fabric_test/sync.hpp"

#include <thread>

namespace fabric::test {

void WaitableCount::add(std::uint64_t n) {
  {
    std::lock_guard lock(mutex_);
    value_ += n;
  }
  cv_.notify_all();
}

std::uint64_t WaitableCount::value() const {
  std::lock_guard lock(mutex_);
  return value_;
}

bool WaitableCount::wait_for(std::uint64_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return cv_.wait_for(lock, timeout, [&] { return value_ >= n; });
}

Status submit_with_retry(const std::function<Status()>& submit, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    Status st = submit();
    if (st.code() != Errc::again || std::chrono::steady_clock::now() >= deadline) return st;
    // The engine frees capacity as completions drain; give its threads the core.
    std::this_thread::yield();
  }
}

}  // namespace fabric::test
