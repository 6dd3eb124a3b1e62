// expect_imm_count() and ImmCounter: what users compute expected counts with.
// A child writes immediates into the parent on command; the parent registers
// expectations and counters at chosen points relative to the arrivals.

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fabric_test/sync.hpp"
#include "remote_writer.hpp"

namespace fabric::conformance {
namespace {

constexpr std::uint32_t kFenceImm = 0xfe4ce;

// What expectation callbacks reported, in firing order.
struct Firings {
  std::mutex mutex;
  std::vector<std::string> order;
  std::vector<std::string> errors;
  test::WaitableCount fired;

  ImmCallback expect(std::string tag, std::uint32_t imm, std::uint64_t count) {
    return
        [this, tag = std::move(tag), imm, count](std::uint32_t got_imm, std::uint64_t got_count) {
          {
            std::lock_guard lock(mutex);
            order.push_back(tag);
            if (got_imm != imm || got_count != count) {
              errors.push_back(tag + " called with (" + std::to_string(got_imm) + ", " +
                               std::to_string(got_count) + ")");
            }
          }
          fired.add();
        };
  }
  std::vector<std::string> snapshot() {
    std::lock_guard lock(mutex);
    return order;
  }
};

class ImmCountingTest : public ProviderTest {
 protected:
  void SetUp() override {
    ProviderTest::SetUp();
    if (IsSkipped()) return;
    writer_ = std::make_unique<RemoteWriter>(config(), 64, 1);
    auto engine = TransferEngine::create(config());
    ASSERT_OK(engine);
    engine_ = std::move(engine).value();
    dst_.resize(4096);
    auto reg = engine_->reg_mr(dst_.data(), dst_.size());
    ASSERT_OK(reg);
    auto fence = engine_->imm_counter(kFenceImm);
    ASSERT_OK(fence);
    fence_ = *fence;
    ASSERT_TRUE(writer_->connect(reg->desc));
  }
  void TearDown() override {
    if (writer_) {
      EXPECT_TRUE(writer_->finish().has_value());
    }
    writer_.reset();
    engine_.reset();
  }

  void send(std::uint32_t imm, std::uint32_t count) {
    const Outcome outcome = writer_->imm(imm, count);
    ASSERT_TRUE(outcome.ok()) << outcome.to_string();
  }
  // Makes it (very nearly) certain that everything sent before has been
  // counted here: the fence is sent after the writer saw its earlier writes
  // complete. Tests stay correct even if it were not.
  void fence() {
    send(kFenceImm, 1);
    ASSERT_OK(fence_->wait_and_consume(1, kWait));
  }

  std::unique_ptr<RemoteWriter> writer_;
  std::unique_ptr<TransferEngine> engine_;
  std::vector<std::byte> dst_;
  std::shared_ptr<ImmCounter> fence_;
  // Outlives engine_ (reset in TearDown), so a late callback never dangles.
  Firings f_;
};

TEST_P(ImmCountingTest, ArrivalsBeforeRegistrationCount) {
  constexpr std::uint32_t kImm = 11;
  send(kImm, 5);
  fence();
  ASSERT_OK(engine_->expect_imm_count(kImm, 5, f_.expect("five", kImm, 5)));
  EXPECT_TRUE(f_.fired.wait_for(1, kWait)) << "5 earlier arrivals did not satisfy expect(5)";
  EXPECT_EQ(f_.snapshot(), std::vector<std::string>{"five"});
}

TEST_P(ImmCountingTest, SurplusCarriesOverToTheNextExpectation) {
  constexpr std::uint32_t kImm = 22;
  ASSERT_OK(engine_->expect_imm_count(kImm, 3, f_.expect("three", kImm, 3)));
  send(kImm, 5);
  ASSERT_TRUE(f_.fired.wait_for(1, kWait)) << "expect(3) did not fire after 5 arrivals";
  fence();
  // No more arrivals of kImm from here: only the 2 surplus ones can satisfy this.
  ASSERT_OK(engine_->expect_imm_count(kImm, 2, f_.expect("two", kImm, 2)));
  EXPECT_TRUE(f_.fired.wait_for(2, kWait)) << "the 2 surplus arrivals were not carried over";
  // The surplus is used up: the next expectation needs a new arrival.
  ASSERT_OK(engine_->expect_imm_count(kImm, 1, f_.expect("one", kImm, 1)));
  EXPECT_FALSE(f_.fired.wait_for(3, kQuiet)) << "expect(1) fired with no arrival left";
  send(kImm, 1);
  EXPECT_TRUE(f_.fired.wait_for(3, kWait));
  EXPECT_EQ(f_.snapshot(), (std::vector<std::string>{"three", "two", "one"}));
  std::lock_guard lock(f_.mutex);
  EXPECT_TRUE(f_.errors.empty()) << f_.errors.front();
}

TEST_P(ImmCountingTest, ExpectationsOfOneImmFireInTheOrderMade) {
  constexpr std::uint32_t kImm = 33;
  ASSERT_OK(engine_->expect_imm_count(kImm, 2, f_.expect("first", kImm, 2)));
  ASSERT_OK(engine_->expect_imm_count(kImm, 3, f_.expect("second", kImm, 3)));
  send(kImm, 2);
  ASSERT_TRUE(f_.fired.wait_for(1, kWait));
  // 2 arrivals satisfy only the first; the second needs 3 more of its own.
  EXPECT_FALSE(f_.fired.wait_for(2, kQuiet)) << "second fired early";
  send(kImm, 3);
  EXPECT_TRUE(f_.fired.wait_for(2, kWait));
  EXPECT_EQ(f_.snapshot(), (std::vector<std::string>{"first", "second"}));

  // Both satisfied by one burst: still in order.
  constexpr std::uint32_t kImm2 = 34;
  ASSERT_OK(engine_->expect_imm_count(kImm2, 2, f_.expect("third", kImm2, 2)));
  ASSERT_OK(engine_->expect_imm_count(kImm2, 3, f_.expect("fourth", kImm2, 3)));
  send(kImm2, 5);
  EXPECT_TRUE(f_.fired.wait_for(4, kWait));
  EXPECT_EQ(f_.snapshot(), (std::vector<std::string>{"first", "second", "third", "fourth"}));
  std::lock_guard lock(f_.mutex);
  EXPECT_TRUE(f_.errors.empty()) << f_.errors.front();
}

TEST_P(ImmCountingTest, CounterWaitsAndConsumes) {
  constexpr std::uint32_t kImm = 44;
  auto made = engine_->imm_counter(kImm);
  ASSERT_OK(made);
  auto counter = *made;
  EXPECT_EQ(counter->imm(), kImm);
  EXPECT_EQ(counter->wait(1, kQuiet).code(), Errc::timeout) << "wait() before any arrival";

  send(kImm, 4);
  ASSERT_OK(counter->wait(4, kWait));
  fence();
  EXPECT_EQ(counter->value(), 4u);
  EXPECT_FALSE(counter->try_consume(5)) << "consumed more than arrived";
  EXPECT_EQ(counter->value(), 4u) << "a failed try_consume changed the count";
  EXPECT_TRUE(counter->try_consume(3));
  EXPECT_EQ(counter->value(), 1u);
  EXPECT_TRUE(counter->try_consume(1));
  EXPECT_EQ(counter->value(), 0u);
  EXPECT_EQ(counter->wait(1, kQuiet).code(), Errc::timeout) << "wait() after all was consumed";

  send(kImm, 2);
  EXPECT_OK(counter->wait_and_consume(2, kWait));
  EXPECT_EQ(counter->value(), 0u);
}

TEST_P(ImmCountingTest, CounterTakesArrivalsThatCameBeforeIt) {
  constexpr std::uint32_t kImm = 55;
  send(kImm, 3);
  fence();
  auto made = engine_->imm_counter(kImm);
  ASSERT_OK(made);
  EXPECT_OK((*made)->wait(3, kWait));
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ((*made)->value(), 3u);
}

// The rule, both ways: while an expectation of an imm is pending, no counter
// may take its arrivals (imm_counter() is refused); while a counter exists, no
// expectation may be made (expect_imm_count() is refused). Before this rule a
// counter made mid-expectation showed the arrivals and the expectation never
// fired.
TEST_P(ImmCountingTest, ACounterIsRefusedWhileAnExpectationOfItsImmIsPending) {
  constexpr std::uint32_t kImm = 66;
  ASSERT_OK(engine_->expect_imm_count(kImm, 5, f_.expect("five", kImm, 5)));
  send(kImm, 2);
  fence();
  auto refused = engine_->imm_counter(kImm);
  ASSERT_FALSE(refused.ok()) << "imm_counter() accepted while expect(5) held 2 arrivals";
  EXPECT_EQ(refused.status().code(), Errc::invalid_argument) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("expect"), std::string::npos)
      << "the error should name the pending expectation: " << refused.status().to_string();
  send(kImm, 3);
  ASSERT_TRUE(f_.fired.wait_for(1, kWait)) << "the expectation was stranded by the refused counter";

  // Fired: the imm is free for a counter, which sees only later arrivals.
  auto made = engine_->imm_counter(kImm);
  ASSERT_OK(made);
  EXPECT_EQ((*made)->value(), 0u) << "the counter took arrivals the expectation had consumed";
  const Status reverse = engine_->expect_imm_count(kImm, 1, f_.expect("late", kImm, 1));
  EXPECT_EQ(reverse.code(), Errc::invalid_argument) << reverse.to_string();
  send(kImm, 1);
  EXPECT_OK((*made)->wait(1, kWait));
  EXPECT_OK(engine_->release_imm_counter(kImm));
  EXPECT_EQ(f_.snapshot(), std::vector<std::string>{"five"});
}

FABRIC_INSTANTIATE_PROVIDERS(ImmCountingTest);

}  // namespace
}  // namespace fabric::conformance
