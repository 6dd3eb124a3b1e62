#include <gtest/gtest.h>

#include <chrono>
#include <thread>

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

}  // namespace
}  // namespace fabric
