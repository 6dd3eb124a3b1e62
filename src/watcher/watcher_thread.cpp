#include "watcher/watcher_thread.hpp"

#include <sys/prctl.h>

#include "fabric/threads.hpp"
#include "watcher/idle_policy.hpp"
#include "watcher/watcher_pool.hpp"

namespace fabric::watcher {

namespace {
using Clock = std::chrono::steady_clock;
// With nothing to watch, only alloc() or stop() matters, and both wake us.
constexpr std::chrono::milliseconds kEmptyNap{100};
// Linux stretches a thread's timed sleeps by its timer slack (50 µs by
// default), which would double a 50 µs poll interval.
constexpr unsigned long kTimerSlackNs = 1000;
}  // namespace

WatcherThread::WatcherThread(WatcherOptions options)
    : options_(std::move(options)),
      pool_(std::make_shared<detail::WatcherPool>(options_)),
      thread_([this] { run(); }) {}

WatcherThread::~WatcherThread() { stop(); }

Result<Watcher> WatcherThread::alloc(WatchCallback callback, WatcherMemory memory) {
  auto w = pool_->alloc(std::move(callback), memory);
  if (w) wake();
  return w;
}

bool WatcherThread::on_this_thread() const noexcept {
  return std::this_thread::get_id() == thread_.get_id();
}

void WatcherThread::stop() {
  pool_->stop_deliveries();
  {
    std::lock_guard lock(mutex_);
    stop_requested_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  if (on_this_thread()) return;
  std::lock_guard lock(stop_mutex_);
  if (thread_.joinable()) thread_.join();
}

void WatcherThread::wake() {
  {
    std::lock_guard lock(mutex_);
    wake_pending_ = true;
  }
  cv_.notify_one();
}

void WatcherThread::nap(std::chrono::nanoseconds d) {
  std::unique_lock lock(mutex_);
  cv_.wait_for(lock, d, [this] {
    return wake_pending_ || stop_requested_.load(std::memory_order_relaxed);
  });
  wake_pending_ = false;
}

void WatcherThread::run() {
  CpuSet cpus = options_.cpus;
  if (cpus.empty()) {
    auto chosen = engine_thread_cpus();
    if (chosen) cpus = std::move(chosen->cpus);
  }
  const PlacedThread placed("fabric-watch", cpus);
  ::prctl(PR_SET_TIMERSLACK, kTimerSlackNs, 0, 0, 0);
  auto last_change = Clock::now();
  while (!stop_requested_.load(std::memory_order_acquire)) {
    const auto pass = pool_->poll_once();
    if (pass.changes > 0) {
      last_change = Clock::now();
      continue;
    }
    if (pass.watching == 0) {
      nap(kEmptyNap);
      // A new watcher is often written right away: start it in the spin phase.
      last_change = Clock::now();
      continue;
    }
    switch (idle_step(Clock::now() - last_change, options_)) {
      case IdleStep::spin:
        break;
      case IdleStep::yield:
        std::this_thread::yield();
        break;
      case IdleStep::sleep:
        nap(options_.poll_interval);
        break;
    }
  }
}

}  // namespace fabric::watcher
