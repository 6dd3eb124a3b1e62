#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

#include "fabric/completion.hpp"
#include "fabric/imm_counter.hpp"

namespace fabric {
namespace {

using namespace std::chrono_literals;

TEST(CompletionFlag, WaitTimesOutWhileNotDone) {
  CompletionFlag flag;
  EXPECT_EQ(flag.wait(1ms).code(), Errc::timeout);
  EXPECT_EQ(flag.status().code(), Errc::again);
}

TEST(CompletionFlag, CarriesTheErrorItCompletedWith) {
  CompletionFlag flag;
  std::thread t([&] { flag.complete(Status(Errc::provider, "boom")); });
  Status st = flag.wait(5s);
  t.join();
  EXPECT_EQ(st.code(), Errc::provider);
  EXPECT_EQ(st.message(), "boom");
}

TEST(CompletionCounter, CountsSuccessesAndKeepsTheFirstError) {
  CompletionCounter c;
  c.complete(Status::success());
  c.complete(Status(Errc::provider, "first"));
  c.complete(Status(Errc::provider, "second"));
  EXPECT_EQ(c.succeeded(), 1u);
  EXPECT_EQ(c.failed(), 2u);
  EXPECT_EQ(c.wait(3, 1s).message(), "first");
}

TEST(OnDone, DeliversToEachKindOfTarget) {
  int calls = 0;
  OnDone cb(DoneCallback([&](const Status& st) { calls += st.ok() ? 1 : 100; }));
  cb.deliver(Status::success());
  EXPECT_EQ(calls, 1);
  auto flag = std::make_shared<CompletionFlag>();
  OnDone f(flag);
  EXPECT_FALSE(f.needs_callback_thread());
  f.deliver(Status::success());
  EXPECT_TRUE(flag->done());
}

TEST(ImmCounter, WaitAndConsumeTakesExactlyN) {
  ImmCounter c(5);
  std::thread t([&] { c.add(3); });
  EXPECT_TRUE(c.wait_and_consume(2, 5s).ok());
  t.join();
  EXPECT_EQ(c.value(), 1u);
  EXPECT_EQ(c.wait(2, 1ms).code(), Errc::timeout);
}


// "Wait forever" spelled with any duration type: each wait must see a
// completion that arrives later, not time out at once (now() + max overflowed).
// Another thread completes after kLater, so every wait here is bounded.
constexpr auto kLater = 30ms;

template <typename Duration>
void expect_flag_waits_for_completion(Duration forever) {
  CompletionFlag flag;
  // Before the thread starts its kLater: the wait cannot end sooner than kLater after this.
  const auto start = std::chrono::steady_clock::now();
  std::thread t([&] {
    std::this_thread::sleep_for(kLater);
    flag.complete(Status::success());
  });
  const Status st = flag.wait(forever);
  t.join();
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_GE(std::chrono::steady_clock::now() - start, kLater);
}

template <typename Duration>
void expect_counters_wait_for_completion(Duration forever) {
  CompletionCounter done;
  ImmCounter imms(1);
  std::thread t([&] {
    std::this_thread::sleep_for(kLater);
    done.complete(Status::success());
    imms.add(2);
  });
  const Status counted = done.wait(1, forever);
  const Status seen = imms.wait(1, forever);
  const Status consumed = imms.wait_and_consume(2, forever);
  t.join();
  EXPECT_TRUE(counted.ok()) << counted.to_string();
  EXPECT_TRUE(seen.ok()) << seen.to_string();
  EXPECT_TRUE(consumed.ok()) << consumed.to_string();
  EXPECT_EQ(imms.value(), 0u);
}

TEST(Waits, HugeDurationsOfEveryTypeWaitForTheCompletion) {
  using namespace std::chrono;
  expect_flag_waits_for_completion(nanoseconds::max());
  expect_flag_waits_for_completion(microseconds::max());
  expect_flag_waits_for_completion(milliseconds::max());
  expect_flag_waits_for_completion(seconds::max());
  expect_flag_waits_for_completion(hours::max());
  expect_flag_waits_for_completion(duration<std::uint64_t, std::ratio<86400>>::max());
  expect_flag_waits_for_completion(duration<double>(1e300));
  expect_flag_waits_for_completion(duration<double>(std::numeric_limits<double>::infinity()));
  expect_flag_waits_for_completion(nanoseconds::max() - 1ns);
  expect_counters_wait_for_completion(nanoseconds::max());
  expect_counters_wait_for_completion(hours::max());
  expect_counters_wait_for_completion(duration<long double, std::ratio<31556952>>(1e12L));
}

// A wait that outlasts its polling (200 us) sleeps on the object's futex word; the completion
// must wake it. A lost wake-up would still end the wait, when the one-second sleep runs out, so
// "well under a second" is what tells the two apart: the completion comes after 20 ms.
constexpr auto kAsleep = 20ms;
constexpr auto kLostWakeUp = 900ms;

TEST(Waits, AWaiterAsleepIsWokenByTheCompletionOfEachKind) {
  CompletionFlag flag;
  CompletionCounter counter;
  ImmCounter imms(9);
  const auto start = std::chrono::steady_clock::now();
  std::thread t([&] {
    std::this_thread::sleep_for(kAsleep);
    flag.complete(Status::success());
    std::this_thread::sleep_for(kAsleep);
    counter.complete(Status(Errc::provider, "second"));
    std::this_thread::sleep_for(kAsleep);
    imms.add(1);
    std::this_thread::sleep_for(kAsleep);
    imms.add(1);
  });
  const Status st = flag.wait(60s);
  const auto flagged = std::chrono::steady_clock::now();
  const Status counted = counter.wait(1, 60s);
  const auto counter_done = std::chrono::steady_clock::now();
  const Status seen = imms.wait(1, 60s);
  const auto imm_seen = std::chrono::steady_clock::now();
  const Status consumed = imms.wait_and_consume(2, 60s);
  const auto imm_consumed = std::chrono::steady_clock::now();
  t.join();
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(counted.code(), Errc::provider);
  EXPECT_TRUE(seen.ok()) << seen.to_string();
  EXPECT_TRUE(consumed.ok()) << consumed.to_string();
  EXPECT_EQ(imms.value(), 0u);
  EXPECT_LT(flagged - start, kAsleep + kLostWakeUp);
  EXPECT_LT(counter_done - flagged, kAsleep + kLostWakeUp);
  EXPECT_LT(imm_seen - counter_done, kAsleep + kLostWakeUp);
  EXPECT_LT(imm_consumed - imm_seen, kAsleep + kLostWakeUp);
}

TEST(Waits, ManyWaitersAsleepOnOneFlagAreAllWoken) {
  CompletionFlag flag;
  std::atomic<int> woken{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.emplace_back([&] {
      if (flag.wait(60s).ok()) woken.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(kAsleep);  // not synchronisation: the waits stay correct without it
  const auto completed = std::chrono::steady_clock::now();
  flag.complete(Status::success());
  for (auto& w : waiters) w.join();
  EXPECT_EQ(woken.load(), 4);
  EXPECT_LT(std::chrono::steady_clock::now() - completed, kLostWakeUp);
}

TEST(Waits, NegativeAndZeroDurationsCheckOnceAndTimeOut) {
  using namespace std::chrono;
  CompletionFlag flag;
  ImmCounter imms(1);
  CompletionCounter done;
  EXPECT_EQ(flag.wait(nanoseconds::min()).code(), Errc::timeout);
  EXPECT_EQ(flag.wait(hours::min()).code(), Errc::timeout);
  EXPECT_EQ(flag.wait(-1ns).code(), Errc::timeout);
  EXPECT_EQ(flag.wait(0ns).code(), Errc::timeout);
  EXPECT_EQ(flag.wait(duration<double>(std::nan(""))).code(), Errc::timeout);
  EXPECT_EQ(done.wait(1, hours::min()).code(), Errc::timeout);
  EXPECT_EQ(imms.wait(1, seconds::min()).code(), Errc::timeout);
  EXPECT_EQ(imms.wait_and_consume(1, minutes::min()).code(), Errc::timeout);
  flag.complete(Status::success());
  EXPECT_TRUE(flag.wait(hours::min()).ok()) << "a done flag is reported even with no time left";
}

TEST(Waits, SaturatingNanosecondsKeepsOrdinaryValuesExact) {
  using namespace std::chrono;
  static_assert(saturating_nanoseconds(5ms) == 5'000'000ns);
  static_assert(saturating_nanoseconds(hours::max()) == nanoseconds::max());
  static_assert(saturating_nanoseconds(nanoseconds::max()) == nanoseconds::max());
  static_assert(saturating_nanoseconds(-3s) == 0ns);
  static_assert(saturating_nanoseconds(duration<std::int64_t, std::pico>::max()) ==
                duration_cast<nanoseconds>(duration<std::int64_t, std::pico>::max()));
  EXPECT_EQ(saturating_nanoseconds(duration<double, std::milli>(1.5)), 1'500'000ns);
  EXPECT_EQ(saturating_nanoseconds(hours(24 * 365 * 200)), hours(24 * 365 * 200));
}

// Counts notify() calls and remembers the thread of the last.
struct CountingNotifier : CompletionNotifier {
  std::atomic<int> calls{0};
  std::atomic<std::thread::id> thread{};
  void notify() noexcept override {
    thread = std::this_thread::get_id();
    calls.fetch_add(1);
  }
};

TEST(CompletionNotifier, RunsOnceOnTheCompletingThreadAfterTheStatusIsSet) {
  CompletionFlag flag;
  auto n = std::make_shared<CountingNotifier>();
  ASSERT_TRUE(flag.notify_on_complete(n));
  EXPECT_EQ(n->calls.load(), 0);
  std::thread::id completer;
  std::thread t([&] {
    completer = std::this_thread::get_id();
    flag.complete(Status(Errc::timeout, "late"));
  });
  t.join();
  EXPECT_EQ(n->calls.load(), 1);
  EXPECT_EQ(n->thread.load(), completer);
  EXPECT_EQ(flag.status().code(), Errc::timeout);
}

TEST(CompletionNotifier, AFlagAlreadyDoneNotifiesAtOnceOnTheCaller) {
  CompletionFlag flag;
  flag.complete(Status::success());
  auto n = std::make_shared<CountingNotifier>();
  ASSERT_TRUE(flag.notify_on_complete(n));
  EXPECT_EQ(n->calls.load(), 1);
  EXPECT_EQ(n->thread.load(), std::this_thread::get_id());
}

TEST(CompletionNotifier, ASecondNotifierWhileTheFirstWaitsIsRefusedAndNeverCalled) {
  CompletionFlag flag;
  auto first = std::make_shared<CountingNotifier>();
  auto second = std::make_shared<CountingNotifier>();
  ASSERT_TRUE(flag.notify_on_complete(first));
  EXPECT_FALSE(flag.notify_on_complete(second));
  EXPECT_FALSE(flag.notify_on_complete(nullptr));
  flag.complete(Status::success());
  EXPECT_EQ(first->calls.load(), 1);
  EXPECT_EQ(second->calls.load(), 0);
  // Once done, a later notifier is told at once: the first one no longer waits.
  auto later = std::make_shared<CountingNotifier>();
  EXPECT_TRUE(flag.notify_on_complete(later));
  EXPECT_EQ(later->calls.load(), 1);
  EXPECT_EQ(first->calls.load(), 1);
}

TEST(CompletionNotifier, RacingCompletionAndRegistrationNotifyExactlyOnce) {
  for (int round = 0; round < 2000; ++round) {
    CompletionFlag flag;
    auto n = std::make_shared<CountingNotifier>();
    std::atomic<bool> go{false};
    std::thread completer([&] {
      while (!go.load(std::memory_order_acquire)) {
      }
      flag.complete(Status::success());
    });
    go.store(true, std::memory_order_release);
    ASSERT_TRUE(flag.notify_on_complete(n));
    completer.join();
    ASSERT_EQ(n->calls.load(), 1) << "round " << round;
  }
}

}  // namespace
}  // namespace fabric
