// Thread lifetime, allocation limits and failures.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cuda/driver.hpp"
#include "watch_record.hpp"
#include "watcher/idle_policy.hpp"
#include "watcher/watcher_thread.hpp"

namespace fabric::watcher {
namespace {

using namespace std::chrono_literals;
using testing::kWait;
using testing::store_word;
using testing::WatchRecord;

TEST(WatcherLifecycle, StopJoinsWithWatchersStillActiveAndBeingWritten) {
  WatcherThread thread;
  std::atomic<bool> stopped{false};
  std::atomic<int> late_calls{0};
  std::vector<std::unique_ptr<WatchRecord>> records;
  std::vector<Watcher> watchers;
  for (int i = 0; i < 16; ++i) {
    records.push_back(std::make_unique<WatchRecord>());
    auto* r = records.back().get();
    auto w = thread.alloc([&, r](std::uint64_t o, std::uint64_t n) {
      if (stopped.load()) ++late_calls;
      return r->callback()(o, n);
    });
    ASSERT_TRUE(w.ok());
    watchers.push_back(std::move(w).value());
  }
  std::atomic<bool> writing{true};
  std::atomic<std::uint64_t> written{0};
  std::thread writer([&] {
    for (std::uint64_t v = 1; writing.load(); ++v) {
      for (auto& w : watchers) store_word(w, v);
      written = v;
    }
  });
  ASSERT_TRUE(records[0]->wait_for_calls(1));
  thread.stop();
  stopped = true;
  thread.stop();  // idempotent
  // The writer keeps going for a while after stop; nothing may be delivered.
  const std::uint64_t at_stop = written.load();
  ASSERT_TRUE(wait_until(kWait, [&] { return written.load() > at_stop + 1000; }));
  writing = false;
  writer.join();
  EXPECT_EQ(late_calls.load(), 0);
  for (auto& w : watchers) EXPECT_TRUE(w.active());
  auto after = thread.alloc(records[0]->callback());
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), Errc::shutdown);
}

TEST(WatcherLifecycle, StopWithNothingAllocated) {
  WatcherThread thread;
  thread.stop();
  thread.stop();
}

TEST(WatcherLifecycle, CudaMemoryWithoutCudaIsUnsupported) {
  WatcherThread thread;
  WatchRecord record;
  auto w = thread.alloc(record.callback(), WatcherMemory::cuda_mapped);
  auto driver = cuda::driver();
  if (driver.ok()) {
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    EXPECT_NE(w->device_word(), nullptr);
    GTEST_SKIP() << "a CUDA device is present; the no-GPU path is not reachable here";
  }
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), Errc::unsupported) << w.status().to_string();
  std::cout << "[          ] without CUDA: " << w.status().to_string() << "\n";
  // Host watchers are unaffected by the failed CUDA slab.
  auto host = thread.alloc(record.callback());
  ASSERT_TRUE(host.ok());
  store_word(*host, 1);
  EXPECT_TRUE(record.wait_for_value(1));
}

TEST(WatcherLifecycle, EmptyCallbackIsInvalid) {
  WatcherThread thread;
  auto w = thread.alloc(WatchCallback{});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), Errc::invalid_argument);
}

TEST(WatcherLifecycle, CapacityIsBoundedAndFreedSlotsCountAgain) {
  WatcherOptions options;
  options.max_watchers = 64;
  WatcherThread thread(options);
  WatchRecord record;
  std::vector<Watcher> all;
  for (int i = 0; i < 64; ++i) {
    auto w = thread.alloc(record.callback());
    ASSERT_TRUE(w.ok()) << i << ": " << w.status().to_string();
    all.push_back(std::move(w).value());
  }
  auto full = thread.alloc(record.callback());
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), Errc::again);
  all.back().release();
  EXPECT_TRUE(thread.alloc(record.callback()).ok());
}

TEST(WatcherLifecycle, ThrowingCallbackKeepsWatching) {
  WatcherThread thread;
  std::atomic<std::uint64_t> last{0};
  auto w = thread.alloc([&](std::uint64_t, std::uint64_t n) -> bool {
    last = n;
    if (n == 1) throw std::runtime_error("callback failure on purpose");
    return true;
  });
  ASSERT_TRUE(w.ok());
  store_word(*w, 1);
  ASSERT_TRUE(wait_until(kWait, [&] { return last.load() == 1; }));
  store_word(*w, 2);
  ASSERT_TRUE(wait_until(kWait, [&] { return last.load() == 2; }));
  EXPECT_TRUE(w->active());
}

TEST(WatcherLifecycle, SlotsSpanSeveralSlabsOnSeparateCacheLines) {
  WatcherThread thread;
  WatchRecord record;
  std::vector<Watcher> all;
  for (int i = 0; i < 130; ++i) {
    auto w = thread.alloc(record.callback());
    ASSERT_TRUE(w.ok());
    all.push_back(std::move(w).value());
  }
  for (std::size_t i = 1; i < 64; ++i) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(all[i].word()) -
                  reinterpret_cast<std::uintptr_t>(all[i - 1].word()),
              64u);
  }
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(all[0].word()) % 4096, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(all[64].word()) % 4096, 0u);
}

TEST(WatcherIdlePolicy, SpinsThenYieldsThenSleeps) {
  WatcherOptions o;
  o.idle_spin = 50us;
  o.idle_yield = 200us;
  EXPECT_EQ(idle_step(0us, o), IdleStep::spin);
  EXPECT_EQ(idle_step(49us, o), IdleStep::spin);
  EXPECT_EQ(idle_step(50us, o), IdleStep::yield);
  EXPECT_EQ(idle_step(249us, o), IdleStep::yield);
  EXPECT_EQ(idle_step(250us, o), IdleStep::sleep);
  o.busy_poll = true;
  EXPECT_EQ(idle_step(10s, o), IdleStep::spin);
}

}  // namespace
}  // namespace fabric::watcher
