#pragma once
// Bounded polling for waits on state another thread sets: spin briefly, then
// yield, then sleep in short steps so a 2-core machine is not starved.

#include <chrono>
#include <thread>

namespace fabric {

template <typename Pred>
bool wait_until(std::chrono::nanoseconds timeout, Pred&& done) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  for (int i = 0; i < 256; ++i) {
    if (done()) return true;
  }
  for (int i = 0;; ++i) {
    if (done()) return true;
    if (clock::now() >= deadline) return done();
    if (i < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

}  // namespace fabric
