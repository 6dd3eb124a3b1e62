// Each way of learning that a submission finished (callback, CompletionFlag,
// CompletionCounter) reports it exactly once.

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "fabric_test/sync.hpp"
#include "remote_target.hpp"

namespace fabric::conformance {
namespace {

constexpr std::uint64_t kRegion = 64 * 1024;
constexpr std::uint32_t kImm = 0xc0de;

class CompletionTest : public RemoteTargetTest {
 protected:
  void SetUp() override { set_up(kRegion, kRegion, std::byte{0x5a}); }

  SingleWrite write(std::uint64_t offset) const {
    SingleWrite w;
    w.length = 1024;
    w.imm = kImm;
    w.src = {src_mr_, offset};
    w.dst = {target_->dst(), offset};
    return w;
  }

};

TEST_P(CompletionTest, CallbackRunsOnceOffTheSubmittingThread) {
  constexpr int kWrites = 16;
  std::mutex mutex;
  std::vector<int> calls(kWrites, 0);
  std::vector<Status> statuses(kWrites);
  std::vector<std::thread::id> threads;
  test::WaitableCount done;
  const StopGuard stop_guard(engine_.get());
  for (int i = 0; i < kWrites; ++i) {
    ASSERT_OK(engine_->submit_single_write(write(i * 1024), DoneCallback([&, i](const Status& st) {
                                             {
                                               std::lock_guard lock(mutex);
                                               ++calls[i];
                                               statuses[i] = st;
                                               threads.push_back(std::this_thread::get_id());
                                             }
                                             done.add();
                                           })));
  }
  ASSERT_TRUE(done.wait_for(kWrites, kWait)) << done.value() << " of " << kWrites << " callbacks";
  EXPECT_EQ(target_->imm_arrivals(kImm, kWrites), kWrites);
  engine_->stop();  // any duplicate delivery would have happened by now
  std::lock_guard lock(mutex);
  for (int i = 0; i < kWrites; ++i) {
    EXPECT_EQ(calls[i], 1) << "callback of write " << i;
    EXPECT_OK(statuses[i]);
  }
  for (const auto& id : threads) EXPECT_NE(id, std::this_thread::get_id());
}

TEST_P(CompletionTest, FlagIsSetWithTheStatus) {
  auto flag = std::make_shared<CompletionFlag>();
  EXPECT_EQ(flag->status().code(), Errc::again) << "status of a flag not yet done";
  ASSERT_OK(engine_->submit_single_write(write(0), flag));
  EXPECT_OK(flag->wait(kWait));
  EXPECT_TRUE(flag->done());
  EXPECT_OK(flag->status());
  EXPECT_EQ(target_->imm_arrivals(kImm, 1), 1u);
}

TEST_P(CompletionTest, CounterCountsEachSubmissionOnce) {
  constexpr std::uint64_t kWrites = 64;
  auto counter = std::make_shared<CompletionCounter>();
  for (std::uint64_t i = 0; i < kWrites; ++i) {
    ASSERT_OK(engine_->submit_single_write(write(i * 1024), counter));
  }
  EXPECT_OK(counter->wait(kWrites, kWait));
  EXPECT_EQ(target_->imm_arrivals(kImm, kWrites), kWrites);
  engine_->stop();
  EXPECT_EQ(counter->succeeded(), kWrites);
  EXPECT_EQ(counter->failed(), 0u);
  EXPECT_EQ(counter->completed(), kWrites) << "after stop()";
}

FABRIC_INSTANTIATE_PROVIDERS(CompletionTest);

}  // namespace
}  // namespace fabric::conformance
