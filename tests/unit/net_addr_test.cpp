#include "fabric/net_addr.hpp"

#include <gtest/gtest.h>

namespace fabric {
namespace {

NetAddr sample(std::size_t domains = 2) {
  std::vector<std::vector<std::byte>> addrs;
  for (std::size_t i = 0; i < domains; ++i) {
    addrs.push_back({std::byte{1}, std::byte(i), std::byte{3}});
  }
  return NetAddr::make(Backend::libfabric, "tcp;ofi_rxm", 0x1234, 65536, addrs).value();
}

TEST(NetAddr, RoundTripsThroughBytesAndText) {
  const NetAddr a = sample();
  auto decoded = NetAddr::decode(a.encode());
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, a);
  auto parsed = NetAddr::parse(a.to_string());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, a);
  EXPECT_EQ(parsed->num_domains(), 2u);
  EXPECT_EQ(parsed->max_message_size(), 65536u);
}

TEST(NetAddr, EveryTruncationIsRejectedAsMalformed) {
  const auto bytes = sample().encode();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    auto r = NetAddr::decode(std::span(bytes).first(n));
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes decoded";
    EXPECT_EQ(r.status().code(), Errc::malformed);
  }
}

TEST(NetAddr, TrailingBytesAreRejected) {
  auto bytes = sample().encode();
  bytes.push_back(std::byte{0});
  EXPECT_EQ(NetAddr::decode(bytes).status().code(), Errc::malformed);
}

TEST(NetAddr, WrongMagicVersionOrDomainCountIsRejected) {
  auto bytes = sample().encode();
  auto bad_magic = bytes;
  bad_magic[0] = std::byte{'X'};
  EXPECT_EQ(NetAddr::decode(bad_magic).status().code(), Errc::malformed);
  auto bad_version = bytes;
  bad_version[3] = std::byte{1};
  auto r = NetAddr::decode(bad_version);
  EXPECT_EQ(r.status().code(), Errc::malformed);
  EXPECT_NE(r.status().message().find("version"), std::string::npos);
  std::vector<std::vector<std::byte>> five(5, std::vector<std::byte>{std::byte{1}});
  EXPECT_FALSE(NetAddr::make(Backend::libfabric, "shm", 1, 1, five).ok());
  EXPECT_FALSE(NetAddr::make(Backend::libfabric, "shm", 1, 1, {}).ok());
}

TEST(NetAddr, GarbageTextIsRejected) {
  for (const char* text : {"", "fna2:", "fna2:zz", "fna2:abc", "hello", "fmd2:00", "fna1:00"}) {
    EXPECT_EQ(NetAddr::parse(text).status().code(), Errc::malformed) << text;
  }
}

}  // namespace
}  // namespace fabric
