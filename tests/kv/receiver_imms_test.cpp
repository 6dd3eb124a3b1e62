// A Receiver takes its immediates from the engine's reservations (kReceiverImms values, released
// with it), so a receiver and another workload on one engine never share one; a second receiver on
// the engine is refused (channel "kv" is open) and holds nothing.

#include <gtest/gtest.h>

#include "fabric/engine.hpp"
#include "fabric/kv/receiver.hpp"

namespace fabric::kv {
namespace {

struct OneEngine {
  std::unique_ptr<TransferEngine> engine;
  KvLayout layout = vllm_cpu({2, 8, 32, 4, {0, 4}, 32, 2});
  std::vector<std::byte> memory = std::vector<std::byte>(layout.span_bytes() + 4096);

  OneEngine() {
    EngineConfig ec;
    ec.provider = "shm";
    engine = TransferEngine::create(ec).value();
  }
  Result<std::unique_ptr<Receiver>> receiver() {
    ReceiverConfig c;
    c.layout = layout;
    c.regions.assign(layout.num_regions, RegionMemory{memory.data(), memory.size()});
    return Receiver::create(*engine, c);
  }
  // Where the next block of n values goes (a probe, released at once).
  std::uint32_t lowest_free(std::uint32_t n) {
    auto probe = engine->reserve_imms(n, "probe");
    EXPECT_TRUE(probe.ok()) << probe.status().to_string();
    return probe.ok() ? probe->first() : 0;
  }
};

TEST(KvReceiverImms, ReceiverHoldsItsBlockBesideAnotherWorkloadsReleasedWithIt) {
  OneEngine e;
  // Reservations go one after the other (next fit): a probe after each shows where it ended.
  const std::uint32_t start = e.lowest_free(1);
  auto a = e.receiver();
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  const std::uint32_t after_a = e.lowest_free(1);
  EXPECT_EQ(after_a, start + 1 + kReceiverImms);
  // Another workload on the same engine reserves after the receiver, never inside its block.
  auto other = e.engine->reserve_imms(kReceiverImms, "weights");
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  EXPECT_GE(other->first(), after_a);
  const std::uint32_t after_other = other->first() + kReceiverImms;
  a->reset();
  // With everything past the other workload taken, a block of kReceiverImms fits only where the
  // receiver was: released with it.
  auto rest = e.engine->reserve_imms_from(after_other, 0u - after_other, "rest");
  ASSERT_TRUE(rest.ok()) << rest.status().to_string();
  auto again = e.engine->reserve_imms(kReceiverImms, "again");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->first(), start);  // overlapping where the receiver was
  // The other workload's block is still held: nothing of that size fits any more.
  EXPECT_FALSE(e.engine->reserve_imms(kReceiverImms, "more").ok());
}

TEST(KvReceiverImms, SecondReceiverOnOneEngineIsRefusedNamingTheChannelAndHoldsNothing) {
  OneEngine e;
  auto a = e.receiver();
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  const std::uint32_t after_a = e.lowest_free(1);
  auto b = e.receiver();
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("channel 'kv'"), std::string::npos) << b.status().message();
  // The refused receiver's immediates went back with it: a block of its size fits right after
  // the first receiver's (first fit from there), where the refused one would have sat.
  auto where = e.engine->reserve_imms_from(after_a, kReceiverImms, "where");
  ASSERT_TRUE(where.ok()) << where.status().to_string();
  EXPECT_EQ(where->first(), after_a);
  where->release();
  // Once the first is gone, the channel is free again.
  a->reset();
  auto c = e.receiver();
  EXPECT_TRUE(c.ok()) << c.status().to_string();
}

TEST(KvReceiverImms, NoFreeBlockIsAnErrorNamingTheReceiver) {
  OneEngine e;
  const std::uint32_t start = e.lowest_free(1);
  // Everything reservable but kReceiverImms - 1 values is taken.
  auto hog = e.engine->reserve_imms_from(start, 0u - start - (kReceiverImms - 1), "hog");
  ASSERT_TRUE(hog.ok()) << hog.status().to_string();
  auto r = e.receiver();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::out_of_range);
  EXPECT_NE(r.status().message().find("KV receiver"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("kv.receiver#"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace fabric::kv
