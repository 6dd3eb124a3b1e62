// MrDesc's access bits: a write-only descriptor (the default registration) keeps wire version 3
// byte for byte, anything else is version 4 with the bits; both decode and parse, the bits
// survive, and bits this build does not know are refused.
#include <gtest/gtest.h>

#include "fabric/memory.hpp"

namespace fabric {
namespace {

NetAddr owner() {
  return NetAddr::make(Backend::libfabric, "shm", 7, 4096, {{std::byte{1}}}).value();
}

MrDesc desc(Access access) {
  return MrDesc::make(owner(), 0x1000, 8192, {{0x1000, 11}}, 0, access).value();
}

TEST(MrDescAccess, DefaultIsWriteOnlyAndStaysVersionThree) {
  const MrDesc plain = MrDesc::make(owner(), 0x1000, 8192, {{0x1000, 11}}).value();
  EXPECT_EQ(plain.access(), Access::remote_write);
  const auto bytes = plain.encode();
  ASSERT_GT(bytes.size(), 4u);
  EXPECT_EQ(static_cast<unsigned>(bytes[3]), MrDesc::kWireVersion);
  EXPECT_EQ(plain.to_string().rfind("fmd3:", 0), 0u);
  EXPECT_EQ(bytes, desc(Access::remote_write).encode());
  EXPECT_EQ(MrDesc{}.access(), Access::remote_write) << "an empty descriptor grants nothing more";
}

TEST(MrDescAccess, ReadableRoundTripsAsVersionFour) {
  for (const Access access : {Access::remote_write | Access::remote_read, Access::remote_read,
                              Access{0}}) {
    SCOPED_TRACE(static_cast<unsigned>(access));
    const MrDesc d = desc(access);
    const auto bytes = d.encode();
    EXPECT_EQ(static_cast<unsigned>(bytes[3]), MrDesc::kWireVersionWithAccess);
    auto decoded = MrDesc::decode(bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
    EXPECT_EQ(decoded->access(), access);
    EXPECT_EQ(*decoded, d);
    EXPECT_EQ(d.to_string().rfind("fmd4:", 0), 0u) << d.to_string();
    auto parsed = MrDesc::parse(d.to_string());
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_FALSE(desc(Access::remote_write) == desc(Access::remote_write | Access::remote_read))
      << "the access bits are part of the descriptor's value";
}

TEST(MrDescAccess, EveryTruncationOfVersionFourIsMalformed) {
  const auto bytes = desc(Access::remote_write | Access::remote_read).encode();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_EQ(MrDesc::decode(std::span(bytes).first(n)).status().code(), Errc::malformed) << n;
  }
}

TEST(MrDescAccess, UnknownBitsAreRefused) {
  auto made = MrDesc::make(owner(), 0x1000, 8192, {{0x1000, 11}}, 0,
                           Access::remote_read | Access{1u << 5});
  EXPECT_EQ(made.status().code(), Errc::malformed);
  // A version-4 text under the version-3 prefix (or the reverse) is not silently read as the
  // other: the checksum covers the version byte.
  std::string text = desc(Access::remote_read).to_string();
  text.replace(0, 5, "fmd3:");
  EXPECT_EQ(MrDesc::parse(text).status().code(), Errc::malformed);
}

}  // namespace
}  // namespace fabric
