#pragma once
// Bounded polling for waits on state another thread sets: spin briefly, then
// yield, then sleep so a 2-core machine is not starved.

#include <chrono>
#include <thread>

namespace fabric {

// `sleep(deadline)` is the third phase: it sleeps a little, or until the setting thread wakes
// it, and says whether done() held (core/blocking_wait.hpp sleeps on a futex word there).
template <typename Pred, typename Sleep>
bool wait_until(std::chrono::nanoseconds timeout, Pred&& done, Sleep&& sleep) {
  using clock = std::chrono::steady_clock;
  // Short waits (an immediate round trip) finish in the spin or yield phase;
  // only waits longer than kYieldFor reach the sleep.
  constexpr auto kYieldFor = std::chrono::microseconds(200);
  const auto start = clock::now();
  // Saturating: start + nanoseconds::max() would overflow (undefined, and in
  // practice a deadline in the past); a negative timeout checks once.
  if (timeout < std::chrono::nanoseconds::zero()) timeout = std::chrono::nanoseconds::zero();
  const auto deadline = timeout >= clock::time_point::max() - start ? clock::time_point::max()
                                                                    : start + timeout;
  for (int i = 0; i < 256; ++i) {
    if (done()) return true;
  }
  for (;;) {
    if (done()) return true;
    const auto now = clock::now();
    if (now >= deadline) return done();
    if (now - start < kYieldFor) {
      std::this_thread::yield();
    } else if (sleep(deadline)) {
      return true;
    }
  }
}

// For state with nothing to wake the waiter: sleeps in 20 us steps.
template <typename Pred>
bool wait_until(std::chrono::nanoseconds timeout, Pred&& done) {
  return wait_until(timeout, done, [](std::chrono::steady_clock::time_point) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    return false;
  });
}

}  // namespace fabric
