#pragma once
// Bounded waiting on things the engine does on its own threads.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

#include "fabric/status.hpp"

namespace fabric::test {

// A count that engine callbacks bump and the test thread waits on.
class WaitableCount {
 public:
  void add(std::uint64_t n = 1);
  [[nodiscard]] std::uint64_t value() const;
  // True once value() >= n; false when the timeout passes first.
  [[nodiscard]] bool wait_for(std::uint64_t n, std::chrono::milliseconds timeout) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  std::uint64_t value_ = 0;
};

// Calls `submit` until it returns anything but Errc::again (back-pressure)
// or the timeout passes; returns the last Status.
Status submit_with_retry(const std::function<Status()>& submit,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(20000));

}  // namespace fabric::test
