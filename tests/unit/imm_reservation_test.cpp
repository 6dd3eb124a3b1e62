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

TEST(ImmSpace, AReleasedBlockIsReusedOnlyOnceTheSpaceRanOutAndDestroyingReleases) {
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
  // Not at once: a WRITE still in flight for the old owner must not count for the next one.
  auto next = space->reserve(100, "b");
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->first(), first + 100);
  // Once the rest of the space is taken, the freed values come back.
  auto rest = space->reserve(0u - (first + 200), "rest");
  ASSERT_TRUE(rest.ok()) << rest.status().to_string();
  EXPECT_EQ(rest->first(), first + 200);
  auto again = space->reserve(100, "c");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->first(), first);
  again->release();
  again->release();  // idempotent
  EXPECT_EQ(space->held(), 2u);
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

TEST(ImmReservation, FromALowestValueTakesTheFirstFreeBlockAtOrAboveIt) {
  auto space = std::make_shared<detail::ImmSpace>();
  auto low = space->reserve(16, "low");
  ASSERT_TRUE(low.ok());
  // Below the reservable range: starts at kFirstReservableImm, past the block held there.
  auto floor = space->reserve(16, "floor", 7);
  ASSERT_TRUE(floor.ok()) << floor.status().to_string();
  EXPECT_EQ(floor->first(), low->first() + 16);
  // Inside a held block: lands after it, never overlapping.
  auto inside = space->reserve(8, "inside", low->first() + 4);
  ASSERT_TRUE(inside.ok());
  EXPECT_EQ(inside->first(), floor->first() + 16);
  // In a gap: exactly there.
  const std::uint32_t gap = inside->first() + 1000;
  auto exact = space->reserve(8, "exact", gap);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->first(), gap);
  auto top = space->reserve(16, "top", 0xfffffff8u);
  ASSERT_FALSE(top.ok());
  EXPECT_EQ(top.status().code(), Errc::out_of_range);
  EXPECT_NE(top.status().message().find("\"top\""), std::string::npos) << top.status().message();
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
