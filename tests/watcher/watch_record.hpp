#pragma once
// Records what one watcher's callback saw and checks the delivery contract on
// the way: each old value is the previous new value.

#include <atomic>
#include <chrono>
#include <cstdint>

#include "common/backoff.hpp"
#include "fabric/watcher.hpp"

namespace fabric::watcher::testing {

inline constexpr std::chrono::seconds kWait{30};

inline void store_word(const Watcher& w, std::uint64_t value) {
  __atomic_store_n(w.word(), value, __ATOMIC_RELEASE);
}

struct WatchRecord {
  std::atomic<std::uint64_t> last{0};
  std::atomic<std::uint64_t> calls{0};
  std::atomic<std::uint64_t> chain_errors{0};  // old != the previous new
  std::atomic<std::uint64_t> order_errors{0};  // new <= old from a rising writer
  bool rising = true;

  WatchCallback callback(bool keep = true) {
    return [this, keep](std::uint64_t old_value, std::uint64_t new_value) {
      if (old_value != last.load(std::memory_order_relaxed)) ++chain_errors;
      if (old_value == new_value || (rising && new_value < old_value)) ++order_errors;
      last.store(new_value, std::memory_order_release);
      calls.fetch_add(1, std::memory_order_acq_rel);
      return keep;
    };
  }

  [[nodiscard]] bool wait_for_value(std::uint64_t value,
                                    std::chrono::nanoseconds timeout = kWait) const {
    return wait_until(timeout, [&] { return last.load(std::memory_order_acquire) == value; });
  }
  [[nodiscard]] bool wait_for_calls(std::uint64_t n,
                                    std::chrono::nanoseconds timeout = kWait) const {
    return wait_until(timeout, [&] { return calls.load(std::memory_order_acquire) >= n; });
  }
};

}  // namespace fabric::watcher::testing
