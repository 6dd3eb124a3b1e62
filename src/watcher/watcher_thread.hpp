#pragma once
// The thread that polls every watched word (the engine owns one). Callbacks
// run on it, one at a time, unless WatcherOptions::executor routes them
// elsewhere (the engine's callback thread), so a slow callback does not delay
// the polling of other words.

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "fabric/status.hpp"
#include "fabric/watcher.hpp"
#include "watcher/watcher_options.hpp"

namespace fabric::detail {
class WatcherPool;
}

namespace fabric::watcher {

class WatcherThread {
 public:
  explicit WatcherThread(WatcherOptions options = {});
  ~WatcherThread();  // stop()s
  WatcherThread(const WatcherThread&) = delete;
  WatcherThread& operator=(const WatcherThread&) = delete;

  // Any thread. The word starts at 0; the first callback reports (0, v).
  Result<Watcher> alloc(WatchCallback callback, WatcherMemory memory = WatcherMemory::host);
  // No callback starts once it returns (one running on an executor thread
  // may still finish); joins the thread. Existing Watchers stay valid but
  // silent; alloc fails with Errc::shutdown. Idempotent; from a callback on
  // the watcher thread it only asks the thread to end.
  void stop();
  [[nodiscard]] bool on_this_thread() const noexcept;
  [[nodiscard]] const WatcherOptions& options() const noexcept { return options_; }

 private:
  void run();
  // Sleeps up to `d`, or until stop() or alloc() wakes it.
  void nap(std::chrono::nanoseconds d);
  void wake();

  const WatcherOptions options_;
  std::shared_ptr<detail::WatcherPool> pool_;
  std::atomic<bool> stop_requested_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool wake_pending_ = false;  // guarded by mutex_
  std::mutex stop_mutex_;
  std::thread thread_;
};

}  // namespace fabric::watcher
