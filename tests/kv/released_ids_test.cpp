// ReleasedIds: the bounded memory of released request ids behind the Sender's immediate
// "released" reject.

#include <gtest/gtest.h>

#include <string>

#include "released_ids.hpp"

namespace fabric::kv {
namespace {

TEST(KvReleasedIds, RemembersHowEachIdEnded) {
  ReleasedIds r(4);
  r.add("a", State::done);
  r.add("b", State::failed);
  EXPECT_EQ(r.find("a"), State::done);
  EXPECT_EQ(r.find("b"), State::failed);
  EXPECT_FALSE(r.find("c").has_value());
}

TEST(KvReleasedIds, ForgetsTheOldestPastTheCapacity) {
  ReleasedIds r(3);
  for (int i = 0; i < 10; ++i) r.add(std::to_string(i), State::done);
  EXPECT_EQ(r.size(), 3u);
  for (int i = 0; i < 7; ++i) EXPECT_FALSE(r.find(std::to_string(i)).has_value()) << i;
  for (int i = 7; i < 10; ++i) EXPECT_TRUE(r.find(std::to_string(i)).has_value()) << i;
}

TEST(KvReleasedIds, AnIdPreparedAgainIsLiveUntilReleasedAgain) {
  ReleasedIds r(2);
  r.add("a", State::failed);
  r.forget("a");
  EXPECT_FALSE(r.find("a").has_value());
  r.add("a", State::done);
  EXPECT_EQ(r.find("a"), State::done);
  // The first release's stale place in the order must not evict the second release of "a".
  r.add("b", State::done);
  EXPECT_EQ(r.find("a"), State::done);
  EXPECT_EQ(r.find("b"), State::done);
  r.add("c", State::done);  // now "a" is the oldest
  EXPECT_FALSE(r.find("a").has_value());
  EXPECT_TRUE(r.find("b").has_value());
  EXPECT_TRUE(r.find("c").has_value());
}

TEST(KvReleasedIds, CapacityZeroRemembersNothing) {
  ReleasedIds r(0);
  r.add("a", State::done);
  EXPECT_FALSE(r.find("a").has_value());
  EXPECT_EQ(r.size(), 0u);
}

}  // namespace
}  // namespace fabric::kv
