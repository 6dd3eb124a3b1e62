#pragma once
// Knobs of the watcher thread. The defaults suit a GPU writer that cannot
// wake the poller: a change is seen within about poll_interval even when idle.

#include <chrono>
#include <cstdint>
#include <functional>

#include "fabric/topology.hpp"

namespace fabric::watcher {

// Runs a delivery somewhere else (e.g. the engine's callback thread). It must
// run every task it accepts, in any order; until it does, that watcher gets
// no further callbacks (later changes coalesce into one delivery).
using Executor = std::function<void(std::function<void()> task)>;

struct WatcherOptions {
  // After the last observed change: spin this long, then yield this long,
  // then sleep poll_interval between passes.
  std::chrono::microseconds idle_spin{50};
  std::chrono::microseconds idle_yield{200};
  std::chrono::microseconds poll_interval{50};
  // Never sleep or yield while any watcher is active: lowest latency, one core.
  bool busy_poll = false;
  // Bound on Watcher::release() waiting for a running callback.
  std::chrono::milliseconds release_timeout{10000};
  // Rounded up to whole slabs of 64.
  std::uint32_t max_watchers = 1u << 16;
  // Empty: callbacks run on the watcher thread itself.
  Executor executor;
  // Where the watcher thread runs (fabric/threads.hpp); empty: engine_thread_cpus()'s default.
  CpuSet cpus;
};

}  // namespace fabric::watcher
