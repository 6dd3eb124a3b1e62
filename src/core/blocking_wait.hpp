#pragma once
// The wait behind CompletionFlag, CompletionCounter and ImmCounter: common/backoff.hpp's spin
// and yield phases, then sleep on the object's WakeWord until the completing thread wakes it
// or the timeout passes, instead of polling in 20 us sleeps.

#include <chrono>

#include "common/backoff.hpp"
#include "fabric/wake_word.hpp"

namespace fabric::detail {

template <typename Pred>
bool wait_blocking(const WakeWord& word, std::chrono::nanoseconds timeout, Pred&& done) {
  return wait_until(timeout, done, [&](std::chrono::steady_clock::time_point deadline) {
    return word.sleep(deadline, done);
  });
}

}  // namespace fabric::detail
