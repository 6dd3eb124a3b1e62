#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "common/backoff.hpp"
#include "fabric/engine.hpp"

namespace fabric {
namespace {

using namespace std::chrono_literals;

TEST(EngineWatcher, HostWritesReachTheCallbackUpToTheFinalValue) {
  auto engine = TransferEngine::create(EngineConfig{});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  std::atomic<std::uint64_t> last{0};
  std::atomic<bool> ordered{true};
  auto w = (*engine)->alloc_uvm_watcher([&](std::uint64_t old_value, std::uint64_t new_value) {
    if (old_value != last.load() || new_value <= old_value) ordered = false;
    last = new_value;
    return true;
  });
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  for (std::uint64_t v = 1; v <= 10000; ++v) __atomic_store_n(w->word(), v, __ATOMIC_RELEASE);
  EXPECT_TRUE(wait_until(5s, [&] { return last.load() == 10000; }));
  EXPECT_TRUE(ordered.load());
  (*engine)->stop();
  auto late = (*engine)->alloc_uvm_watcher([](std::uint64_t, std::uint64_t) { return true; });
  EXPECT_EQ(late.status().code(), Errc::shutdown);
}

TEST(EngineWatcher, GpuMappedMemoryWithoutAGpuIsUnsupportedNotACrash) {
  auto engine = TransferEngine::create(EngineConfig{});
  ASSERT_TRUE(engine.ok());
  auto w = (*engine)->alloc_uvm_watcher([](std::uint64_t, std::uint64_t) { return true; },
                                        WatcherMemory::cuda_mapped);
  if (w.ok()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(w.status().code(), Errc::unsupported) << w.status().to_string();
}

}  // namespace
}  // namespace fabric
