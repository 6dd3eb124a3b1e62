// The worker's posting slice (engine/post_slice.hpp): when it reads the clock, when it is spent,
// and the clock read that metrics' post latency is stamped with (last_read_ns), which must be
// the pass's start or a read taken after the posts before it, never a stale one.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

#include "engine/post_slice.hpp"

namespace fabric::engine {
namespace {

using namespace std::chrono_literals;
using Clock = PostSlice::Clock;

TEST(PostSlice, APassIsStampedWithItsStartUntilItReadsTheClock) {
  PostSlice slice;
  const Clock::time_point start = Clock::now() - 1ms;  // within the 2 ms slice
  slice.start(start);
  EXPECT_EQ(slice.last_read_ns(), to_ns(start));
  for (std::int32_t i = 1; i < PostSlice::kPostsPerCheck; ++i) {
    ASSERT_FALSE(slice.after_post(64)) << "small post " << i;
  }
  EXPECT_EQ(slice.last_read_ns(), to_ns(start)) << "no clock read before the check";
}

TEST(PostSlice, TheCheckAfterSmallPostsRefreshesTheStamp) {
  PostSlice slice;
  const Clock::time_point start = Clock::now() - 1ms;
  slice.start(start);
  for (std::int32_t i = 0; i < PostSlice::kPostsPerCheck; ++i) (void)slice.after_post(64);
  EXPECT_GT(slice.last_read_ns(), to_ns(start));
  EXPECT_LE(slice.last_read_ns(), to_ns(Clock::now()));
}

TEST(PostSlice, ALargePostReadsTheClockAtOnce) {
  PostSlice slice;
  const Clock::time_point start = Clock::now() - 1ms;
  slice.start(start);
  const Clock::time_point before = Clock::now();
  EXPECT_FALSE(slice.after_post(PostSlice::kLargePost));
  EXPECT_GE(slice.last_read_ns(), to_ns(before));
}

TEST(PostSlice, ASliceStartedLongAgoIsSpentAtItsFirstCheckAndStaysSpent) {
  PostSlice slice;
  slice.start(Clock::now() - 1s);
  EXPECT_TRUE(slice.after_post(PostSlice::kLargePost));
  EXPECT_TRUE(slice.spent());
  EXPECT_TRUE(slice.after_post(1)) << "every later post is told the slice is spent";
  slice.start(Clock::now());
  EXPECT_FALSE(slice.spent()) << "a new pass starts a new slice";
}

}  // namespace
}  // namespace fabric::engine
