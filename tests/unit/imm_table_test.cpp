#include "engine/imm_table.hpp"

#include <gtest/gtest.h>

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
  table.attach(counter);
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

}  // namespace
}  // namespace fabric::engine
