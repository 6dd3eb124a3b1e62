// The worker's idle sleep (engine/sleeper.hpp): a wake-up after published work, or bytes on a
// watched fd, end it at once; work seen before it starts skips it; nothing else cuts it short.
// Every sleep here is given 10 s, so a lost wake-up fails the bound (5 s), not the test's time.

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "engine/sleeper.hpp"

namespace fabric::engine {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
constexpr auto kLong = std::chrono::microseconds(10s);
constexpr auto kBound = 5s;

struct Pipe {
  std::array<int, 2> fds{-1, -1};
  Pipe() { EXPECT_EQ(::pipe(fds.data()), 0); }
  ~Pipe() {
    for (int fd : fds) ::close(fd);
  }
  void put() const { ASSERT_EQ(::write(fds[1], "x", 1), 1); }
};

TEST(Sleeper, OpensItsEventFd) { EXPECT_TRUE(Sleeper().status().ok()); }

TEST(Sleeper, WorkPublishedBeforeTheSleepSkipsIt) {
  Sleeper s;
  const auto t0 = Clock::now();
  s.sleep_for(kLong, false, [] { return true; });
  EXPECT_LT(Clock::now() - t0, kBound);
}

TEST(Sleeper, AWakeAfterPublishingWorkEndsTheSleepWheneverItComes) {
  Sleeper s;
  for (int round = 0; round < 200; ++round) {
    std::atomic<bool> work{false};
    auto slept = std::async(std::launch::async, [&] {
      s.sleep_for(kLong, false, [&] { return work.load(std::memory_order_relaxed); });
    });
    // Before, during or after the other thread's check: each order must end its sleep.
    if (round % 2 == 1) std::this_thread::yield();
    work.store(true, std::memory_order_relaxed);
    s.wake();
    ASSERT_EQ(slept.wait_for(kBound), std::future_status::ready) << "round " << round;
  }
}

TEST(Sleeper, BytesOnAWatchedFdEndTheSleep) {
  Sleeper s;
  Pipe p;
  const std::array<int, 2> watched{-1, p.fds[0]};  // a Domain without a wait fd is skipped
  s.watch(watched);
  auto slept =
      std::async(std::launch::async, [&] { s.sleep_for(kLong, true, [] { return false; }); });
  p.put();
  EXPECT_EQ(slept.wait_for(kBound), std::future_status::ready);
}

TEST(Sleeper, AWatchedFdIsIgnoredWhenTheSleepDoesNotWatch) {
  Sleeper s;
  Pipe p;
  const std::array<int, 1> watched{p.fds[0]};
  s.watch(watched);
  p.put();
  const auto limit = std::chrono::microseconds(30ms);
  const auto t0 = Clock::now();
  s.sleep_for(limit, false, [] { return false; });
  EXPECT_GE(Clock::now() - t0, limit) << "a readable fd the sleep does not watch woke it";
}

TEST(Sleeper, WakeAlwaysEndsTheNextSleepToo) {
  Sleeper s;
  s.wake_always();  // nobody asleep: the eventfd keeps it
  const auto t0 = Clock::now();
  s.sleep_for(kLong, false, [] { return false; });
  EXPECT_LT(Clock::now() - t0, kBound);
  // It was consumed: a sleep after it runs to its limit.
  const auto limit = std::chrono::microseconds(20ms);
  const auto t1 = Clock::now();
  s.sleep_for(limit, false, [] { return false; });
  EXPECT_GE(Clock::now() - t1, limit);
}

TEST(Sleeper, AWakeWithNobodyAsleepCostsTheNextSleepNothing) {
  Sleeper s;
  s.wake();  // not asleep: no write, so the next sleep is not cut short
  const auto limit = std::chrono::microseconds(20ms);
  const auto t0 = Clock::now();
  s.sleep_for(limit, false, [] { return false; });
  EXPECT_GE(Clock::now() - t0, limit);
}

}  // namespace
}  // namespace fabric::engine
