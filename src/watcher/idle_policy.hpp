#pragma once
// What the poller does after a pass that found no change. Nothing can wake it
// when a GPU writes a word, so sleeping trades latency for CPU: a change that
// lands while it sleeps waits up to poll_interval (plus the OS's wake-up
// latency); staying awake costs a core.

#include <chrono>

#include "watcher/watcher_options.hpp"

namespace fabric::watcher {

enum class IdleStep { spin, yield, sleep };

// `quiet` is the time since the last observed change.
constexpr IdleStep idle_step(std::chrono::nanoseconds quiet, const WatcherOptions& o) noexcept {
  if (o.busy_poll || quiet < o.idle_spin) return IdleStep::spin;
  if (quiet < o.idle_spin + o.idle_yield) return IdleStep::yield;
  return IdleStep::sleep;
}

}  // namespace fabric::watcher
