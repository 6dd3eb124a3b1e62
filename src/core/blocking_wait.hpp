#pragma once
// The wait behind CompletionFlag, CompletionCounter and ImmCounter: spin briefly, yield for up
// to 200 us (an immediate round trip finishes there), then sleep on the object's WakeWord
// until the completing thread wakes it or the timeout passes. common/backoff.hpp's wait_until
// does the same for state that has no WakeWord, sleeping in 20 us steps instead.

#include <chrono>
#include <thread>

#include "fabric/wake_word.hpp"

namespace fabric::detail {

template <typename Pred>
bool wait_blocking(const WakeWord& word, std::chrono::nanoseconds timeout, Pred&& done) {
  using clock = std::chrono::steady_clock;
  constexpr auto kYieldFor = std::chrono::microseconds(200);
  const auto start = clock::now();
  // Saturating, as in wait_until: a huge timeout is a deadline at the end of time.
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
    } else if (word.sleep(deadline, done)) {
      return true;
    }
  }
}

}  // namespace fabric::detail
