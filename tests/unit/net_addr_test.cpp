#include "fabric/net_addr.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include "fabric/memory.hpp"

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
  for (const char* text : {"", "fna3:", "fna3:zz", "fna3:abc", "hello", "fmd3:00", "fna1:00"}) {
    EXPECT_EQ(NetAddr::parse(text).status().code(), Errc::malformed) << text;
  }
}

}  // namespace
}  // namespace fabric

namespace fabric {
namespace {

std::vector<std::byte> as_bytes(const void* p, std::size_t n) {
  const auto* b = static_cast<const std::byte*>(p);
  return {b, b + n};
}

TEST(NetAddrDescribe, ShowsProviderAndIpPortNotHex) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(4242);
  ASSERT_EQ(::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr), 1);
  const NetAddr a =
      NetAddr::make(Backend::libfabric, "tcp;ofi_rxm", 0xabcdef0123456789ULL, 65536,
                    {as_bytes(&sa, sizeof sa)})
          .value();
  EXPECT_EQ(a.describe(), "NetAddr(tcp;ofi_rxm 127.0.0.1:4242 instance=abcdef01)");
}

TEST(NetAddrDescribe, ShowsShmNameAndShortHexOtherwise) {
  const char name[] = "fi_shm://4242/fl-1";
  std::vector<std::byte> opaque(40, std::byte{0xab});
  const NetAddr a = NetAddr::make(Backend::libfabric, "shm", 1, 65536,
                                  {as_bytes(name, sizeof name), opaque})
                        .value();
  EXPECT_EQ(a.describe(), "NetAddr(shm fi_shm://4242/fl-1, abababababababab.. (40 B) instance=00000000)");
}

TEST(MrDescDescribe, ShowsSizeBaseAndOwner) {
  const NetAddr owner = sample(1);
  const MrDesc d = MrDesc::make(owner, 0x1000, 64 << 20, {{0x1000, 7}}).value();
  EXPECT_EQ(d.describe(), "MrDesc(64 MiB at 0x1000 of group 0 of " + owner.describe() + ")");
}

}  // namespace
}  // namespace fabric
