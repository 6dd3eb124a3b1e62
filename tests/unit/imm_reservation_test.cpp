// Reserved immediates (fabric/imm_reservation.hpp): blocks that never overlap, come back when
// released or destroyed, and name their owner in every error.

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/imm_space.hpp"
#include "fabric/engine.hpp"

namespace fabric {
namespace {

TEST(ImmSpace, BlocksDoNotOverlapAndStartAboveTheUnmanagedValues) {
  auto space = std::make_shared<detail::ImmSpace>();
  auto kv = space->reserve(1024, "kv");
  auto weights = space->reserve(16, "weights");
  auto moe = space->reserve(1u << 16, "moe");
  ASSERT_TRUE(kv.ok() && weights.ok() && moe.ok());
  const std::vector<const ImmReservation*> all = {&*kv, &*weights, &*moe};
  for (const auto* a : all) {
    EXPECT_GE(a->first(), kFirstReservableImm);
    for (const auto* b : all) {
      if (a == b) continue;
      EXPECT_FALSE(a->contains(b->first())) << a->owner() << " holds " << b->owner() << "'s first";
      EXPECT_FALSE(a->contains(b->first() + b->count() - 1));
    }
  }
  EXPECT_EQ(space->held(), 3u);
}

TEST(ImmSpace, AReleasedBlockIsReusedAndDestroyingReleases) {
  auto space = std::make_shared<detail::ImmSpace>();
  std::uint32_t first = 0;
  {
    auto a = space->reserve(100, "a");
    ASSERT_TRUE(a.ok());
    first = a->first();
    auto moved = std::move(*a);
    EXPECT_EQ(a->count(), 0u);  // a moved-from reservation holds nothing
    EXPECT_EQ(moved.first(), first);
    EXPECT_EQ(space->held(), 1u);
  }
  EXPECT_EQ(space->held(), 0u);
  auto again = space->reserve(100, "b");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->first(), first);
  again->release();
  again->release();  // idempotent
  EXPECT_EQ(space->held(), 0u);
}

TEST(ImmSpace, BadRequestsAreClearErrors) {
  auto space = std::make_shared<detail::ImmSpace>();
  EXPECT_EQ(space->reserve(0, "kv").status().code(), Errc::invalid_argument);
  EXPECT_EQ(space->reserve(1, "").status().code(), Errc::invalid_argument);
  auto kv = space->reserve(8, "kv");
  ASSERT_TRUE(kv.ok());
  auto twice = space->reserve(8, "kv");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("\"kv\" holds"), std::string::npos);
  auto huge = space->reserve(0xffffffffu, "huge");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), Errc::out_of_range);
  EXPECT_EQ(space->held(), 1u);  // nothing lost by the failures
}

TEST(ImmReservation, CheckAndAtNameTheOwner) {
  auto space = std::make_shared<detail::ImmSpace>();
  auto kv = space->reserve(4, "kv");
  ASSERT_TRUE(kv.ok());
  EXPECT_TRUE(kv->check(kv->first() + 3).ok());
  const Status outside = kv->check(kv->first() + 4);
  EXPECT_EQ(outside.code(), Errc::invalid_argument);
  EXPECT_NE(outside.message().find("\"kv\""), std::string::npos) << outside.message();
  EXPECT_EQ(kv->at(3).value(), kv->first() + 3);
  EXPECT_EQ(kv->at(4).status().code(), Errc::out_of_range);
}

TEST(ImmReservation, OutlivingItsEngineIsSafe) {
  auto engine = TransferEngine::create(EngineConfig{});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto r = (*engine)->reserve_imms(32, "late");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto other = (*engine)->reserve_imms(32, "other");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(r->contains(other->first()));
  engine->reset();  // the engine and its book go first
  r->release();     // and the reservation finds nothing to give back to
  EXPECT_EQ(r->count(), 0u);
}

}  // namespace
}  // namespace fabric
