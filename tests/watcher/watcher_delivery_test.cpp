// Delivery contract: (old, new) chains, the final value always arrives, and
// arrives once.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "watch_record.hpp"
#include "watcher/watcher_thread.hpp"

namespace fabric::watcher {
namespace {

using testing::store_word;
using testing::WatchRecord;

TEST(WatcherDelivery, FirstChangeReportsZeroAsOld) {
  WatcherThread thread;
  std::atomic<std::uint64_t> seen_old{~0ull};
  std::atomic<std::uint64_t> seen_new{0};
  auto w = thread.alloc([&](std::uint64_t o, std::uint64_t n) {
    seen_old = o;
    seen_new.store(n, std::memory_order_release);
    return true;
  });
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_TRUE(w->active());
  EXPECT_EQ(*w->word(), 0u);
  EXPECT_EQ(w->device_word(), nullptr);
  store_word(*w, 42);
  ASSERT_TRUE(wait_until(testing::kWait, [&] { return seen_new.load() == 42; }));
  EXPECT_EQ(seen_old.load(), 0u);
}

TEST(WatcherDelivery, ManyWatchersWrittenByManyThreads) {
  constexpr std::size_t kWatchers = 256;
  constexpr std::size_t kWriters = 4;
  constexpr std::uint64_t kRounds = 2000;
  WatcherThread thread;
  std::vector<std::unique_ptr<WatchRecord>> records;
  std::vector<Watcher> watchers;
  for (std::size_t i = 0; i < kWatchers; ++i) {
    records.push_back(std::make_unique<WatchRecord>());
    auto w = thread.alloc(records.back()->callback());
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    watchers.push_back(std::move(w).value());
  }
  std::vector<std::thread> writers;
  for (std::size_t t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      for (std::uint64_t v = 1; v <= kRounds; ++v) {
        for (std::size_t i = t; i < kWatchers; i += kWriters) store_word(watchers[i], v);
        // Now and then let the poller catch up, so writes and polls interleave
        // instead of the writers finishing before the first pass.
        if (v % 100 == 0) (void)records[t]->wait_for_value(v);
      }
    });
  }
  for (auto& w : writers) w.join();
  std::uint64_t total_calls = 0;
  for (std::size_t i = 0; i < kWatchers; ++i) {
    ASSERT_TRUE(records[i]->wait_for_value(kRounds))
        << "watcher " << i << " stuck at " << records[i]->last.load();
    EXPECT_EQ(records[i]->chain_errors.load(), 0u) << "watcher " << i;
    EXPECT_EQ(records[i]->order_errors.load(), 0u) << "watcher " << i;
    total_calls += records[i]->calls.load();
  }
  RecordProperty("callbacks", std::to_string(total_calls));
}

// One burst, then checkpoints: a free-running writer usually finishes before
// the poller's next pass, so every 3000th value it waits for that value to be
// delivered before racing on.
void write_changes(const Watcher& w, const WatchRecord& record, std::uint64_t n,
                   std::uint64_t checkpoint_every) {
  for (std::uint64_t v = 1; v <= n; ++v) {
    store_word(w, v);
    if (checkpoint_every != 0 && v % checkpoint_every == 0) (void)record.wait_for_value(v);
  }
}

TEST(WatcherDelivery, BurstOfThreeHundredThousandChangesKeepsTheFinalValue) {
  constexpr std::uint64_t kChanges = 300'000;
  WatcherThread thread;
  WatchRecord record;
  auto w = thread.alloc(record.callback());
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  std::thread writer([&] { write_changes(*w, record, kChanges, 0); });
  writer.join();
  ASSERT_TRUE(record.wait_for_value(kChanges)) << "stuck at " << record.last.load();
  EXPECT_EQ(record.chain_errors.load(), 0u);
  EXPECT_EQ(record.order_errors.load(), 0u);
  EXPECT_GE(record.calls.load(), 1u);
}

TEST(WatcherDelivery, ThreeHundredThousandChangesKeepTheFinalValue) {
  constexpr std::uint64_t kChanges = 300'000;
  WatcherThread thread;
  WatchRecord record;
  auto w = thread.alloc(record.callback());
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  std::thread writer([&] { write_changes(*w, record, kChanges, 3000); });
  writer.join();
  ASSERT_TRUE(record.wait_for_value(kChanges)) << "stuck at " << record.last.load();
  EXPECT_EQ(record.chain_errors.load(), 0u);
  EXPECT_EQ(record.order_errors.load(), 0u);
  EXPECT_GE(record.calls.load(), kChanges / 3000);
  EXPECT_LE(record.calls.load(), kChanges);
  RecordProperty("callbacks", std::to_string(record.calls.load()));
}

TEST(WatcherDelivery, FinalValueArrivesExactlyOnce) {
  WatcherThread thread;
  WatchRecord record;
  record.rising = false;
  WatchRecord sentinel;
  auto w = thread.alloc(record.callback());
  auto s = thread.alloc(sentinel.callback());
  ASSERT_TRUE(w.ok() && s.ok());
  store_word(*w, 9);
  ASSERT_TRUE(record.wait_for_value(9));
  store_word(*w, 3);  // lower values are changes too
  ASSERT_TRUE(record.wait_for_value(3));
  // Two sentinel deliveries after the last change prove at least one full
  // pass that could have redelivered 3.
  for (std::uint64_t v = 1; v <= 2; ++v) {
    store_word(*s, v);
    ASSERT_TRUE(sentinel.wait_for_value(v));
  }
  EXPECT_EQ(record.calls.load(), 2u);
  EXPECT_EQ(record.chain_errors.load(), 0u);
  EXPECT_EQ(record.order_errors.load(), 0u);
}

TEST(WatcherDelivery, WritingTheSameValueBackIsNoChange) {
  WatcherThread thread;
  WatchRecord record;
  record.rising = false;
  auto w = thread.alloc(record.callback());
  ASSERT_TRUE(w.ok());
  store_word(*w, 5);
  ASSERT_TRUE(record.wait_for_value(5));
  // 6 then 5 again, faster than a pass: either (5,6),(6,5) or nothing; never (5,5).
  store_word(*w, 6);
  store_word(*w, 5);
  store_word(*w, 8);
  ASSERT_TRUE(record.wait_for_value(8));
  EXPECT_EQ(record.order_errors.load(), 0u);
  EXPECT_EQ(record.chain_errors.load(), 0u);
}

}  // namespace
}  // namespace fabric::watcher
