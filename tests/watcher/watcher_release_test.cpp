// release() and callbacks returning false: slots are freed and reused, and no
// callback starts after release() returns.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
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

TEST(WatcherRelease, CallbackReturningFalseFreesTheSlotForReuse) {
  WatcherThread thread;
  WatchRecord once;
  auto first = thread.alloc(once.callback(/*keep=*/false));
  ASSERT_TRUE(first.ok());
  std::uint64_t* const word = first->word();
  store_word(*first, 1);
  ASSERT_TRUE(once.wait_for_value(1));
  ASSERT_TRUE(wait_until(kWait, [&] { return !first->active(); }));

  WatchRecord again;
  auto second = thread.alloc(again.callback());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->word(), word) << "the freed slot was not reused";
  EXPECT_EQ(*second->word(), 0u) << "a reused word starts at 0";
  // The stale handle must not touch the slot's new owner.
  first->release();
  EXPECT_TRUE(second->active());
  store_word(*second, 7);
  ASSERT_TRUE(again.wait_for_value(7));
  EXPECT_EQ(again.chain_errors.load(), 0u);
  EXPECT_EQ(once.calls.load(), 1u);
}

TEST(WatcherRelease, ReleaseWithADeliveryQueuedNeverStartsIt) {
  ManualExecutor exec;
  WatcherOptions options;
  options.executor = exec.executor();
  WatcherThread thread(options);
  WatchRecord record;
  auto w = thread.alloc(record.callback());
  ASSERT_TRUE(w.ok());
  store_word(*w, 1);
  ASSERT_TRUE(wait_until(kWait, [&] { return exec.pending() == 1; }));
  w->release();
  EXPECT_FALSE(w->active());
  EXPECT_EQ(exec.run_all(), 1u);
  EXPECT_EQ(record.calls.load(), 0u);
  // The queued delivery freed the slot on its way out.
  WatchRecord next;
  auto reused = thread.alloc(next.callback());
  ASSERT_TRUE(reused.ok());
  EXPECT_EQ(reused->word(), w->word());
}

TEST(WatcherRelease, ReleaseWhileThePollerIsBusyElsewhere) {
  WatcherThread thread;
  std::atomic<bool> blocker_entered{false};
  std::atomic<bool> unblock{false};
  auto blocker = thread.alloc([&](std::uint64_t, std::uint64_t) {
    blocker_entered = true;
    wait_until(kWait, [&] { return unblock.load(); });
    return true;
  });
  WatchRecord victim;
  WatchRecord sentinel;
  auto v = thread.alloc(victim.callback());
  auto s = thread.alloc(sentinel.callback());
  ASSERT_TRUE(blocker.ok() && v.ok() && s.ok());

  store_word(*blocker, 1);
  ASSERT_TRUE(wait_until(kWait, [&] { return blocker_entered.load(); }));
  store_word(*v, 1);  // pending: the poller is stuck in the blocker's callback
  v->release();
  unblock = true;
  for (std::uint64_t i = 1; i <= 2; ++i) {
    store_word(*s, i);
    ASSERT_TRUE(sentinel.wait_for_value(i));
  }
  EXPECT_EQ(victim.calls.load(), 0u);
}

TEST(WatcherRelease, ReleaseWaitsForARunningCallback) {
  WatcherThread thread;
  std::atomic<bool> entered{false};
  std::atomic<bool> unblock{false};
  std::atomic<bool> callback_done{false};
  auto w = thread.alloc([&](std::uint64_t, std::uint64_t) {
    entered = true;
    wait_until(kWait, [&] { return unblock.load(); });
    callback_done = true;
    return true;
  });
  ASSERT_TRUE(w.ok());
  store_word(*w, 1);
  ASSERT_TRUE(wait_until(kWait, [&] { return entered.load(); }));

  std::atomic<bool> release_returned{false};
  bool done_when_returned = false;
  std::thread releaser([&] {
    w->release();
    done_when_returned = callback_done.load();
    release_returned = true;
  });
  // !active() means release() has marked the slot and is now waiting.
  ASSERT_TRUE(wait_until(kWait, [&] { return !w->active(); }));
  EXPECT_FALSE(release_returned.load());
  unblock = true;
  releaser.join();
  EXPECT_TRUE(done_when_returned);
}

TEST(WatcherRelease, ReleaseFromItsOwnCallbackDoesNotDeadlock) {
  // !active() turns true as soon as release() marks the slot, while the
  // callback still runs; the slot is back on the free list only once the pool
  // has destroyed the callback, which this capture's deleter reports. Declared
  // before the thread, whose pool may destroy the callback last.
  std::atomic<bool> callback_destroyed{false};
  WatcherThread thread;
  std::unique_ptr<Watcher> self;
  std::atomic<int> calls{0};
  std::shared_ptr<void> destruction_probe(nullptr,
                                          [&](void*) { callback_destroyed = true; });
  auto w = thread.alloc([&, probe = std::move(destruction_probe)](std::uint64_t, std::uint64_t) {
    ++calls;
    self->release();
    return true;  // ignored: released
  });
  ASSERT_TRUE(w.ok());
  self = std::make_unique<Watcher>(std::move(w).value());
  store_word(*self, 1);
  ASSERT_TRUE(wait_until(kWait, [&] { return !self->active(); }));
  ASSERT_TRUE(wait_until(kWait, [&] { return callback_destroyed.load(); }));
  EXPECT_EQ(calls.load(), 1);
  WatchRecord next;
  auto reused = thread.alloc(next.callback());
  ASSERT_TRUE(reused.ok());
  EXPECT_EQ(reused->word(), self->word());
}

TEST(WatcherRelease, ReleaseIsIdempotentAndHandlesMoveSafely) {
  WatcherThread thread;
  WatchRecord record;
  auto w = thread.alloc(record.callback());
  ASSERT_TRUE(w.ok());
  Watcher a = std::move(w).value();
  Watcher b = std::move(a);
  EXPECT_FALSE(a.active());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(a.word(), nullptr);
  a.release();
  EXPECT_TRUE(b.active());
  b.release();
  b.release();
  EXPECT_FALSE(b.active());
  Watcher empty;
  empty.release();
  EXPECT_FALSE(empty.active());
}

TEST(WatcherRelease, DestructorReleases) {
  WatcherThread thread;
  WatchRecord record;
  std::uint64_t* word = nullptr;
  {
    auto w = thread.alloc(record.callback());
    ASSERT_TRUE(w.ok());
    word = w->word();
  }
  auto again = thread.alloc(record.callback());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->word(), word);
}

TEST(WatcherRelease, HandleMayOutliveTheThread) {
  Watcher kept;
  {
    WatcherThread thread;
    WatchRecord record;
    auto w = thread.alloc(record.callback());
    ASSERT_TRUE(w.ok());
    kept = std::move(w).value();
  }
  EXPECT_TRUE(kept.active());
  store_word(kept, 3);  // nobody polls; the memory is still ours
  kept.release();
  EXPECT_FALSE(kept.active());
}

}  // namespace
}  // namespace fabric::watcher
