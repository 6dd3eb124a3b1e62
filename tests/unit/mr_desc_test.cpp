#include <gtest/gtest.h>

#include "fabric/memory.hpp"

namespace fabric {
namespace {

MrDesc sample() {
  auto owner = NetAddr::make(Backend::libfabric, "shm", 7, 4096,
                             {{std::byte{1}}, {std::byte{2}, std::byte{3}}})
                   .value();
  return MrDesc::make(owner, 0x1000, 8192, {{0x1000, 11}, {0, 12}}).value();
}

TEST(MrDesc, RoundTripsThroughBytesAndText) {
  const MrDesc d = sample();
  auto decoded = MrDesc::decode(d.encode());
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, d);
  auto parsed = MrDesc::parse(d.to_string());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->keys()[1].rkey, 12u);
  EXPECT_EQ(parsed->size(), 8192u);
}

TEST(MrDesc, EveryTruncationIsRejectedAsMalformed) {
  const auto bytes = sample().encode();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_EQ(MrDesc::decode(std::span(bytes).first(n)).status().code(), Errc::malformed) << n;
  }
}

TEST(MrDesc, InconsistentFieldsAreRejected) {
  auto owner = sample().owner();
  EXPECT_FALSE(MrDesc::make(owner, 0, 0, {{0, 1}, {0, 2}}).ok());             // empty region
  EXPECT_FALSE(MrDesc::make(owner, ~0ull, 2, {{0, 1}, {0, 2}}).ok());         // wraps
  EXPECT_FALSE(MrDesc::make(owner, 0, 1, {{0, 1}}).ok());                     // key count
  auto bytes = sample().encode();
  bytes.push_back(std::byte{0});
  EXPECT_EQ(MrDesc::decode(bytes).status().code(), Errc::malformed);
}

}  // namespace
}  // namespace fabric
