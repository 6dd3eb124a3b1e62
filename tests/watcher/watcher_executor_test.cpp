// Deliveries routed through an executor (as the engine routes them to its
// callback thread).
#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "manual_executor.hpp"
#include "watch_record.hpp"
#include "watcher/watcher_thread.hpp"

namespace fabric::watcher {
namespace {

using testing::kWait;
using testing::ManualExecutor;
using testing::store_word;
using testing::WatchRecord;

// A single FIFO thread, like the engine's callback thread.
class QueueThread {
 public:
  QueueThread() : thread_([this] { run(); }) {}
  ~QueueThread() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  Executor executor() {
    return [this](std::function<void()> task) {
      {
        std::lock_guard lock(mutex_);
        tasks_.push_back(std::move(task));
      }
      cv_.notify_one();
    };
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait_for(lock, std::chrono::milliseconds(100),
                   [&] { return done_ || !tasks_.empty(); });
      if (tasks_.empty()) {
        if (done_) return;
        continue;
      }
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool done_ = false;
  std::thread thread_;
};

TEST(WatcherExecutor, ChainHoldsAndFinalValueArrives) {
  constexpr std::uint64_t kChanges = 300'000;
  QueueThread callbacks;
  WatcherOptions options;
  options.executor = callbacks.executor();
  WatchRecord record;
  {
    WatcherThread thread(options);
    auto w = thread.alloc(record.callback());
    ASSERT_TRUE(w.ok());
    std::thread writer([&] {
      for (std::uint64_t v = 1; v <= kChanges; ++v) {
        store_word(*w, v);
        if (v % 3000 == 0) (void)record.wait_for_value(v);  // interleave with deliveries
      }
    });
    writer.join();
    ASSERT_TRUE(record.wait_for_value(kChanges)) << "stuck at " << record.last.load();
  }
  EXPECT_EQ(record.chain_errors.load(), 0u);
  EXPECT_EQ(record.order_errors.load(), 0u);
  EXPECT_GE(record.calls.load(), kChanges / 3000);
  RecordProperty("callbacks", std::to_string(record.calls.load()));
}

TEST(WatcherExecutor, OneDeliveryInFlightPerWatcher) {
  ManualExecutor exec;
  WatcherOptions options;
  options.executor = exec.executor();
  WatcherThread thread(options);
  WatchRecord record;
  auto w = thread.alloc(record.callback());
  ASSERT_TRUE(w.ok());
  store_word(*w, 1);
  ASSERT_TRUE(wait_until(kWait, [&] { return exec.pending() == 1; }));
  store_word(*w, 2);
  store_word(*w, 3);
  // While (0,1) waits, later values coalesce instead of queueing more tasks.
  WatchRecord sentinel;
  auto s = thread.alloc(sentinel.callback());
  ASSERT_TRUE(s.ok());
  store_word(*s, 1);
  ASSERT_TRUE(wait_until(kWait, [&] { return exec.pending() == 2; }));
  EXPECT_EQ(exec.run_all(), 2u);
  EXPECT_EQ(record.last.load(), 1u);
  ASSERT_TRUE(wait_until(kWait, [&] { return exec.pending() == 1; }));
  EXPECT_EQ(exec.run_all(), 1u);
  EXPECT_EQ(record.last.load(), 3u);
  EXPECT_EQ(record.calls.load(), 2u);
  EXPECT_EQ(record.chain_errors.load(), 0u);
}

TEST(WatcherExecutor, QueuedDeliveryAfterStopIsSkipped) {
  ManualExecutor exec;
  WatcherOptions options;
  options.executor = exec.executor();
  WatcherThread thread(options);
  WatchRecord record;
  auto w = thread.alloc(record.callback());
  ASSERT_TRUE(w.ok());
  store_word(*w, 1);
  ASSERT_TRUE(wait_until(kWait, [&] { return exec.pending() == 1; }));
  thread.stop();
  EXPECT_EQ(exec.run_all(), 1u);
  EXPECT_EQ(record.calls.load(), 0u);
  EXPECT_TRUE(w->active());
  w->release();
  EXPECT_FALSE(w->active());
}

TEST(WatcherExecutor, FalseFromACallbackOnTheExecutorFreesTheSlot) {
  QueueThread callbacks;
  WatcherOptions options;
  options.executor = callbacks.executor();
  WatcherThread thread(options);
  WatchRecord once;
  auto w = thread.alloc(once.callback(/*keep=*/false));
  ASSERT_TRUE(w.ok());
  store_word(*w, 4);
  ASSERT_TRUE(wait_until(kWait, [&] { return !w->active(); }));
  EXPECT_EQ(once.last.load(), 4u);
  WatchRecord next;
  auto reused = thread.alloc(next.callback());
  ASSERT_TRUE(reused.ok());
  EXPECT_EQ(reused->word(), w->word());
}

}  // namespace
}  // namespace fabric::watcher
