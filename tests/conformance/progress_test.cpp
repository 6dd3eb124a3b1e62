// TransferEngine::progress(): a caller that runs the worker's loop itself. Immediates reach
// its counters and its submissions are posted and completed while the worker thread sleeps,
// callers progressing from several threads beside the worker count every arrival once, and
// leave the worker thread its own tasks.

#include <atomic>
#include <thread>
#include <vector>

#include "remote_target.hpp"
#include "remote_writer.hpp"

namespace fabric::conformance {
namespace {

using ProgressTest = ProviderTest;

constexpr std::uint32_t kImm = 0x9e06;

// A worker thread that, once idle, polls at most once a minute: longer than any bound below,
// so what finishes within them was progressed by the test's own threads.
EngineConfig sleepy(EngineConfig config) {
  config.idle_spin = std::chrono::microseconds(0);
  config.idle_yield = std::chrono::microseconds(0);
  config.idle_sleep = std::chrono::minutes(1);
  return config;
}

// Calls progress() until done() or kWait; whether any pass found work.
template <typename Done>
bool progress_until(TransferEngine& engine, Done&& done) {
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  bool found_work = false;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    found_work |= engine.progress();
  }
  return found_work;
}

// This side of a RemoteWriter: an engine with a registered buffer and a counter of kImm.
struct Receiver {
  std::unique_ptr<TransferEngine> engine;
  std::vector<std::byte> dst = std::vector<std::byte>(4096);
  std::shared_ptr<ImmCounter> counter;
};

::testing::AssertionResult open_receiver(const EngineConfig& config, RemoteWriter& writer,
                                         Receiver& out) {
  auto engine = TransferEngine::create(config);
  if (!engine) return ::testing::AssertionFailure() << engine.status().to_string();
  out.engine = std::move(engine).value();
  auto reg = out.engine->reg_mr(out.dst.data(), out.dst.size());
  if (!reg) return ::testing::AssertionFailure() << reg.status().to_string();
  auto counter = out.engine->imm_counter(kImm);
  if (!counter) return ::testing::AssertionFailure() << counter.status().to_string();
  out.counter = std::move(counter).value();
  return writer.connect(reg->desc);
}

TEST_P(ProgressTest, WaitingCallerCountsImmediatesWhileTheWorkerSleeps) {
  constexpr std::uint32_t kCount = 100;
  RemoteWriter writer(config(), 64, 1);
  Receiver rx;
  ASSERT_TRUE(open_receiver(sleepy(config()), writer, rx));
  TransferEngine* engine = rx.engine.get();
  ImmCounter* counter = rx.counter.get();

  // The writer waits for its completions, which (tcp, verbs) need this side to progress.
  Outcome outcome;
  std::thread send([&] { outcome = writer.imm(kImm, kCount); });
  const bool found_work =
      progress_until(*engine, [&] { return counter->value() >= kCount; });
  send.join();
  ASSERT_TRUE(outcome.ok()) << outcome.to_string();
  EXPECT_EQ(counter->value(), kCount);
  EXPECT_TRUE(found_work) << "progress() never found work, yet the immediates arrived";
  engine->stop();
  EXPECT_TRUE(writer.finish().has_value());
}

TEST_P(ProgressTest, WaitingCallerPostsAndCompletesItsSubmissionsWhileTheWorkerSleeps) {
  constexpr std::uint32_t kCount = 100;
  RemoteTarget target(config(), 4096);
  ASSERT_ENGINE(engine, sleepy(config()));
  ASSERT_TRUE(target.connect());
  auto done = std::make_shared<CompletionCounter>();
  for (std::uint32_t i = 0; i < kCount; ++i) {
    // The submission wakes the worker thread, which may post it; its completion comes back
    // while that thread sleeps again, so this thread's progress() must deliver it.
    ASSERT_OK(engine->submit_imm(kImm, target.dst(), done));
    (void)progress_until(*engine, [&] { return done->completed() > i; });
    ASSERT_EQ(done->completed(), i + 1u) << "request " << i << " did not complete";
  }
  EXPECT_EQ(done->failed(), 0u) << done->first_error().to_string();
  EXPECT_EQ(target.imm_arrivals(kImm, kCount), kCount);
  engine->stop();
  EXPECT_TRUE(target.finish());
}

TEST_P(ProgressTest, CallersOnSeveralThreadsBesideTheWorkerCountEachArrivalOnce) {
  constexpr std::uint32_t kCount = 2000;
  RemoteWriter writer(config(), 64, 1);
  Receiver rx;
  ASSERT_TRUE(open_receiver(config(), writer, rx));
  TransferEngine* engine = rx.engine.get();
  ImmCounter* counter = rx.counter.get();

  std::atomic<bool> sent{false};
  std::vector<std::thread> helpers;
  for (int t = 0; t < 2; ++t) {
    helpers.emplace_back([&] {
      (void)progress_until(*engine, [&] { return sent.load(); });
    });
  }
  const Outcome outcome = writer.imm(kImm, kCount);
  sent.store(true);
  for (auto& h : helpers) h.join();
  ASSERT_TRUE(outcome.ok()) << outcome.to_string();
  ASSERT_OK(counter->wait(kCount, kWait));
  std::this_thread::sleep_for(kQuiet);  // a surplus arrival would show by now
  EXPECT_EQ(counter->value(), kCount);
  engine->stop();
  EXPECT_TRUE(writer.finish().has_value());
}

TEST_P(ProgressTest, CallersThatProgressWithoutPauseLeaveTheWorkerItsTasks) {
  // Registration runs on the worker thread (within control_timeout); two threads that call
  // progress() back to back must not keep it from the loop.
  ASSERT_ENGINE(engine, config());
  std::atomic<bool> done{false};
  std::vector<std::thread> helpers;
  for (int t = 0; t < 2; ++t) {
    helpers.emplace_back([&] { (void)progress_until(*engine, [&] { return done.load(); }); });
  }
  std::vector<std::byte> buf(4096);
  Status failed;
  for (int i = 0; i < 20 && failed.ok(); ++i) {
    auto reg = engine->reg_mr(buf.data(), buf.size());
    if (!reg) {
      failed = reg.status();
      break;
    }
    failed = engine->dereg_mr(reg->handle);
  }
  done.store(true);
  for (auto& h : helpers) h.join();
  EXPECT_OK(failed);
  engine->stop();
}

TEST_P(ProgressTest, ReturnsFalseOnceStopped) {
  ASSERT_ENGINE(engine, config());
  engine->stop();
  EXPECT_FALSE(engine->progress());
}

FABRIC_INSTANTIATE_PROVIDERS(ProgressTest);

}  // namespace
}  // namespace fabric::conformance
