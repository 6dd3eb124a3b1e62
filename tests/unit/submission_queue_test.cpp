// The worker's submission stack hands over every pushed Op exactly once, each producer's in the
// order it pushed them, however many threads push at once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "engine/op_pool.hpp"
#include "engine/submission_queue.hpp"

namespace fabric::engine {
namespace {

// An op tagged with its producer and its place in that producer's sequence.
OpPtr tagged(OpPool& pool, std::uint32_t producer, std::uint32_t seq) {
  OpPtr op = pool.acquire();
  op->total = producer;
  op->posted = seq;
  return op;
}

TEST(SubmissionQueue, TakesEveryPushOldestFirstAndIsEmptyAfter) {
  OpPool pool;
  SubmissionQueue queue;
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.take_all(), nullptr);
  for (std::uint32_t i = 0; i < 5; ++i) queue.push(tagged(pool, 0, i));
  EXPECT_FALSE(queue.empty());
  std::uint32_t expected = 0;
  for (Op* op = queue.take_all(); op != nullptr; ++expected) {
    Op* next = op->next_submitted;
    EXPECT_EQ(op->posted, expected);
    OpRecycler{}(op);
    op = next;
  }
  EXPECT_EQ(expected, 5u);
  EXPECT_TRUE(queue.empty());
}

TEST(SubmissionQueue, ConcurrentProducersLoseNothingAndKeepEachOnesOrder) {
  constexpr std::uint32_t kProducers = 4;
  constexpr std::uint32_t kEach = 20000;
  OpPool pool;
  SubmissionQueue queue;
  std::vector<std::thread> producers;
  for (std::uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (std::uint32_t i = 0; i < kEach; ++i) queue.push(tagged(pool, p, i));
    });
  }
  std::vector<std::uint32_t> next(kProducers, 0);
  std::uint32_t taken = 0;
  bool in_order = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (taken < kProducers * kEach && std::chrono::steady_clock::now() < deadline) {
    for (Op* op = queue.take_all(); op != nullptr;) {
      Op* following = op->next_submitted;
      in_order &= op->total < kProducers && op->posted == next[op->total];
      if (op->total < kProducers) next[op->total] = op->posted + 1;
      ++taken;
      OpRecycler{}(op);
      op = following;
    }
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(taken, kProducers * kEach) << "ops lost or the consumer ran out of time";
  EXPECT_TRUE(in_order) << "a producer's ops came out of the order it pushed them";
  EXPECT_TRUE(queue.empty());
}

}  // namespace
}  // namespace fabric::engine
