#pragma once
// Bounded polling for waits on state another thread sets: spin briefly, then
// yield, then sleep in short steps so a 2-core machine is not starved.

#include <chrono>
#include <thread>

namespace fabric {

template <typename Pred>
bool wait_until(std::chrono::nanoseconds timeout, Pred&& done) {
  using clock = std::chrono::steady_clock;
  // Short waits (an immediate round trip) finish in the spin or yield phase;
  // only waits longer than kYieldFor pay the sleep granularity.
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
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

}  // namespace fabric
