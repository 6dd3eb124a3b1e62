// The same peer added concurrently from 16 threads while traffic runs (LightLLM#1470: a
// concurrent re-add of the same remote agent crashed UCX). Each round a new incarnation of the
// peer appears (a restart: new NetAddr, never seen here); 16 threads released together each
// add it in a peer group with a peer the traffic already uses and scatter into both at once.
// Every add and scatter succeeds and lands byte-exact, the traffic beside it never fails.

#include <latch>
#include <thread>

#include "fabric_test/data.hpp"
#include "field_test.hpp"

namespace fabric::field {
namespace {

constexpr int kThreads = 16;
constexpr int kRounds = 4;
constexpr std::uint64_t kSlice = 8192;

class ConcurrentReAdd : public FieldTest {};

TEST_P(ConcurrentReAdd, SixteenThreadsAddTheSameNewPeerWhileTrafficRuns) {
  auto engine = make_engine();
  ASSERT_NE(engine, nullptr);
  std::vector<std::byte> src = test::random_bytes(kThreads * kSlice, 0x4eadd);
  auto reg = engine->reg_mr(src.data(), src.size());
  ASSERT_TRUE(reg.ok()) << reg.status().to_string();
  {
    Traffic traffic(*engine, 1, 0x4eadd);
    auto stable = std::make_shared<Incarnation>(0, provider());
    ASSERT_TRUE(stable->connect());
    (void)traffic.swap(0, stable);
    traffic.start(1);
    int adds_ok = 0;
    for (int round = 1; round <= kRounds; ++round) {
      auto fresh = std::make_shared<Incarnation>(round, provider());
      ASSERT_TRUE(fresh->connect());
      std::vector<std::uint32_t> stable_chunks, fresh_chunks;
      for (int t = 0; t < kThreads; ++t) {
        auto a = stable->take_chunk();
        auto b = fresh->take_chunk();
        ASSERT_TRUE(a && b);
        stable_chunks.push_back(*a);
        fresh_chunks.push_back(*b);
      }
      std::vector<Status> added(kThreads), scattered(kThreads);
      std::latch go(kThreads);
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          go.arrive_and_wait();  // all 16 add the same peer at once
          auto group = engine->add_peer_group({fresh->addr(), stable->addr()});
          added[t] = group.status();
          if (!group.ok()) return;
          Scatter sc;
          sc.group = *group;
          sc.src = reg->handle;
          sc.slices.push_back({fresh->dst(), kSlice, t * kSlice, fresh_chunks[t] * kChunk});
          sc.slices.push_back({stable->dst(), kSlice, t * kSlice, stable_chunks[t] * kChunk});
          auto done = std::make_shared<CompletionFlag>();
          scattered[t] = engine->submit_scatter(sc, done);
          if (scattered[t].ok()) scattered[t] = done->wait(kWait);
        });
      }
      for (auto& th : threads) th.join();
      for (int t = 0; t < kThreads; ++t) {
        ASSERT_TRUE(added[t].ok()) << "round " << round << " thread " << t << ": " << added[t].to_string();
        ASSERT_TRUE(scattered[t].ok()) << "round " << round << " thread " << t << ": " << scattered[t].to_string();
        const std::span<const std::byte> want(src.data() + t * kSlice, kSlice);
        EXPECT_TRUE(test::bytes_equal(fresh->memory().subspan(fresh_chunks[t] * kChunk, kSlice), want));
        EXPECT_TRUE(test::bytes_equal(stable->memory().subspan(stable_chunks[t] * kChunk, kSlice), want));
        ++adds_ok;
      }
      for (int t = 0; t < kThreads; ++t) stable->give_chunk(stable_chunks[t]);
      ASSERT_TRUE(fresh->quit());
    }
    ASSERT_TRUE(traffic.stop(kRequestTimeout + kMargin));
    std::printf("[field] re-add/%s: %d rounds x %d threads added the same new peer at once: %d "
                "adds and scatters ok, byte-exact; traffic beside them: %llu ok, %llu failed\n",
                provider().c_str(), kRounds, kThreads, adds_ok,
                static_cast<unsigned long long>(stable->ok.load()),
                static_cast<unsigned long long>(stable->failed.load()));
    EXPECT_EQ(stable->failed.load(), 0u) << stable->first_problem();
    EXPECT_EQ(stable->wrong(), 0u) << stable->first_problem();
    EXPECT_TRUE(stable->quit());
  }
  engine->stop();
}

FABRIC_FIELD_PROVIDERS(ConcurrentReAdd);

}  // namespace
}  // namespace fabric::field
