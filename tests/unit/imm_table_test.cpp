#include "engine/imm_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace fabric::engine {
namespace {

struct Fired {
  std::uint32_t imm;
  std::uint64_t count;
  int tag;
};

class ImmTableTest : public ::testing::Test {
 protected:
  ImmTable table{[this](ImmCallback cb, std::uint32_t imm, std::uint64_t count) {
    cb(imm, count);
  }};
  std::vector<Fired> fired;
  ImmCallback record(int tag) {
    return [this, tag](std::uint32_t imm, std::uint64_t count) {
      fired.push_back({imm, count, tag});
    };
  }
};

TEST_F(ImmTableTest, ArrivalsBeforeRegistrationCount) {
  table.arrive(7, 3);
  table.expect(7, 3, record(1));
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].count, 3u);
  EXPECT_EQ(table.unclaimed(7), 0u);
}

TEST_F(ImmTableTest, SurplusCarriesOverToTheNextExpectation) {
  table.expect(7, 2, record(1));
  table.arrive(7, 5);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(table.unclaimed(7), 3u);
  table.expect(7, 3, record(2));
  ASSERT_EQ(fired.size(), 2u);
  EXPECT_EQ(fired[1].tag, 2);
  EXPECT_EQ(table.unclaimed(7), 0u);
}

TEST_F(ImmTableTest, ExpectationsOfOneImmFireInOrder) {
  table.expect(1, 2, record(1));
  table.expect(1, 1, record(2));
  table.arrive(1);
  EXPECT_TRUE(fired.empty());  // the first needs 2; the second waits behind it
  table.arrive(1);
  table.arrive(1);
  ASSERT_EQ(fired.size(), 2u);
  EXPECT_EQ(fired[0].tag, 1);
  EXPECT_EQ(fired[1].tag, 2);
}

TEST_F(ImmTableTest, DifferentImmsAreCountedApart) {
  table.expect(1, 1, record(1));
  table.arrive(2, 10);
  EXPECT_TRUE(fired.empty());
  table.arrive(1);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].imm, 1u);
}

TEST_F(ImmTableTest, ZeroCountFiresAtOnce) {
  table.expect(3, 0, record(1));
  EXPECT_EQ(fired.size(), 1u);
}

TEST_F(ImmTableTest, CounterTakesUnclaimedAndLaterArrivals) {
  table.arrive(9, 4);
  auto counter = std::make_shared<ImmCounter>(9);
  ASSERT_TRUE(table.attach(counter).ok());
  EXPECT_EQ(counter->value(), 4u);
  table.arrive(9, 2);
  EXPECT_EQ(counter->value(), 6u);
  EXPECT_TRUE(counter->try_consume(5));
  EXPECT_FALSE(counter->try_consume(2));
  table.detach(9);
  EXPECT_EQ(table.unclaimed(9), 1u);
  table.arrive(9);
  EXPECT_EQ(counter->value(), 0u);
  EXPECT_EQ(table.unclaimed(9), 2u);
}

TEST_F(ImmTableTest, CounterIsRefusedWhileAnExpectationIsPending) {
  table.arrive(7, 2);
  table.expect(7, 5, record(1));
  auto counter = std::make_shared<ImmCounter>(7);
  const Status st = table.attach(counter);
  EXPECT_EQ(st.code(), Errc::invalid_argument) << st.to_string();
  table.arrive(7, 3);
  ASSERT_EQ(fired.size(), 1u) << "the expectation was stranded";
  EXPECT_EQ(fired[0].count, 5u);
  EXPECT_EQ(counter->value(), 0u);
  EXPECT_TRUE(table.attach(counter).ok());
  table.arrive(7, 1);
  EXPECT_EQ(counter->value(), 1u);
}

// Only two threads racing expect_imm_count() and imm_counter() can put an
// expectation behind a counter: the expectation keeps its claim.
TEST_F(ImmTableTest, AnExpectationBehindACounterIsServedFirst) {
  auto counter = std::make_shared<ImmCounter>(8);
  ASSERT_TRUE(table.attach(counter).ok());
  table.expect(8, 2, record(1));
  table.arrive(8, 3);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(counter->value(), 1u);
  table.arrive(8);
  EXPECT_EQ(counter->value(), 2u);
}

TEST_F(ImmTableTest, DrainedEntriesAreForgottenSoFreshImmediatesStayBounded) {
  // 10^6 distinct immediates, as a server using a fresh one per request sees.
  constexpr std::uint32_t kImms = 1'000'000;
  std::size_t most = 0;
  std::uint64_t reached = 0;
  ImmTable counting{[&](ImmCallback, std::uint32_t, std::uint64_t) { ++reached; }};
  for (std::uint32_t i = 0; i < kImms; ++i) {
    if (i % 2 == 0) {
      counting.expect(i, 2, {});
      counting.arrive(i, 2);
    } else {
      counting.arrive(i, 3);  // arrivals first, then an exact expectation
      counting.expect(i, 3, {});
    }
    most = std::max(most, counting.tracked());
  }
  EXPECT_EQ(reached, kImms);
  EXPECT_EQ(counting.tracked(), 0u);
  EXPECT_LE(most, 1u);

  // A counter keeps its entry until released; what it still holds is kept after.
  auto counter = std::make_shared<ImmCounter>(5);
  ASSERT_TRUE(counting.attach(counter).ok());
  counting.arrive(5, 2);
  EXPECT_EQ(counting.tracked(), 1u);
  ASSERT_TRUE(counter->try_consume(2));
  counting.detach(5);
  EXPECT_EQ(counting.tracked(), 0u);
  counting.arrive(6);
  EXPECT_EQ(counting.tracked(), 1u) << "an unclaimed arrival must be kept for a later expectation";
}

}  // namespace
}  // namespace fabric::engine
