// NetAddr and MrDesc wire formats (version 3, docs/api.md#wire-formats):
// round trips preserve equality, every malformed input is an Errc::malformed
// value — never a crash, never a half-built object — and a corrupted byte is
// caught by the trailing CRC-32 before any field is trusted.

#include <zlib.h>

#include <string>
#include <vector>

#include "fabric_test/data.hpp"
#include "fixture.hpp"

namespace fabric::conformance {
namespace {

using Bytes = std::vector<std::byte>;

std::vector<std::byte> address_bytes(std::size_t n, std::uint64_t seed) {
  return test::random_bytes(n, seed);
}

NetAddr sample_addr(std::size_t domains = 2, std::size_t groups = 1) {
  std::vector<Bytes> parts;
  for (std::size_t i = 0; i < domains * groups; ++i) parts.push_back(address_bytes(16 + 8 * (i % 4), i));
  auto addr = NetAddr::make(Backend::libfabric, "tcp;ofi_rxm", 0x1122334455667788ull, 65536,
                            std::move(parts), groups);
  EXPECT_OK(addr);
  return addr ? *addr : NetAddr{};
}

MrDesc sample_desc(std::size_t domains = 2) {
  std::vector<RemoteKey> keys;
  for (std::size_t i = 0; i < domains; ++i) keys.push_back({0x7f0000001000ull + i, 0xabc0 + i});
  auto desc = MrDesc::make(sample_addr(domains), 0x7f0000001000ull, 1 << 20, std::move(keys));
  EXPECT_OK(desc);
  return desc ? *desc : MrDesc{};
}

// Offsets of version 3's variable fields, from the layout in docs/api.md.
// NetAddr: "FNA" ver backend name_len name[] instance:u64 max_msg:u32 groups:u8 count:u8
//          { len:u16 addr[] } * groups * count crc32:u32
constexpr std::size_t kCrcBytes = 4;
std::size_t addr_count_offset(const NetAddr& a) {
  std::size_t tail = kCrcBytes;
  for (std::size_t g = 0; g < a.num_groups(); ++g) {
    for (std::size_t i = 0; i < a.num_domains(); ++i) tail += 2 + a.domain_address(g, i).size();
  }
  return a.encode().size() - tail - 1;
}
std::size_t addr_groups_offset(const NetAddr& a) { return addr_count_offset(a) - 1; }
constexpr std::size_t kAddrVersion = 3;
constexpr std::size_t kAddrNameLen = 5;
// MrDesc: "FMD" ver base:u64 length:u64 owner_len:u16 owner[] group:u8 count:u8
//         {addr:u64 rkey:u64} * count crc32:u32
constexpr std::size_t kDescVersion = 3;
constexpr std::size_t kDescLength = 12;
constexpr std::size_t kDescOwnerLen = 20;
constexpr std::size_t kDescOwner = 22;

// Recomputes the trailing CRC-32 (zlib's, as docs/api.md says) after a test
// changed a field, so that the field's own validation is what gets tested.
Bytes resealed(Bytes b) {
  b.resize(b.size() - kCrcBytes);
  const auto crc = static_cast<std::uint32_t>(
      ::crc32(0L, reinterpret_cast<const Bytef*>(b.data()), static_cast<uInt>(b.size())));
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<std::byte>((crc >> (8 * i)) & 0xff));
  return b;
}

void put_u16(Bytes& b, std::size_t at, std::uint16_t v) {
  b[at] = static_cast<std::byte>(v & 0xff);
  b[at + 1] = static_cast<std::byte>(v >> 8);
}
void put_u64(Bytes& b, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

template <typename T>
::testing::AssertionResult malformed(const Result<T>& r) {
  if (r.ok()) return ::testing::AssertionFailure() << "decoded successfully";
  if (r.status().code() != Errc::malformed) {
    return ::testing::AssertionFailure() << "expected malformed, got " << r.status().to_string();
  }
  if (r.status().message().empty()) return ::testing::AssertionFailure() << "empty message";
  return ::testing::AssertionSuccess();
}

std::string hex(const Bytes& b) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (auto c : b) {
    out += kDigits[static_cast<unsigned>(c) >> 4];
    out += kDigits[static_cast<unsigned>(c) & 15];
  }
  return out;
}

// ---- NetAddr ---------------------------------------------------------------

TEST(NetAddrWireTest, EncodeDecodeRoundTripPreservesEquality) {
  for (std::size_t domains = 1; domains <= NetAddr::kMaxDomains; ++domains) {
    const NetAddr a = sample_addr(domains);
    auto back = NetAddr::decode(a.encode());
    ASSERT_OK(back);
    EXPECT_EQ(*back, a) << domains << " domains";
    EXPECT_EQ(back->encode(), a.encode());
  }
}

TEST(NetAddrWireTest, ToStringParseRoundTripPreservesEquality) {
  const NetAddr a = sample_addr(3);
  EXPECT_EQ(a.to_string().rfind("fna3:", 0), 0u) << a.to_string();
  auto back = NetAddr::parse(a.to_string());
  ASSERT_OK(back);
  EXPECT_EQ(*back, a);
}

TEST(NetAddrWireTest, EveryTruncationIsMalformed) {
  const Bytes full = sample_addr().encode();
  for (std::size_t n = 0; n < full.size(); ++n) {
    EXPECT_TRUE(malformed(NetAddr::decode(std::span(full).first(n)))) << "first " << n << " bytes";
  }
}

TEST(NetAddrWireTest, TrailingBytesAreMalformed) {
  Bytes b = sample_addr().encode();
  b.push_back(std::byte{0});
  EXPECT_TRUE(malformed(NetAddr::decode(b)));
}

TEST(NetAddrWireTest, WrongMagicOrVersionIsMalformed) {
  const Bytes good = sample_addr().encode();
  for (std::size_t i = 0; i < 3; ++i) {
    Bytes b = good;
    b[i] ^= std::byte{0x20};
    EXPECT_TRUE(malformed(NetAddr::decode(b))) << "magic byte " << i;
  }
  for (int version : {0, 1, 2, 255}) {
    Bytes b = good;
    b[kAddrVersion] = static_cast<std::byte>(version);
    auto r = NetAddr::decode(resealed(b));
    EXPECT_TRUE(malformed(r)) << "version " << version;
    EXPECT_NE(r.status().message().find("unsupported version"), std::string::npos)
        << r.status().to_string();
  }
  EXPECT_TRUE(malformed(NetAddr::decode(sample_desc().encode()))) << "an MrDesc";
}

TEST(NetAddrWireTest, DomainCountOutsideOneToFourIsMalformed) {
  const NetAddr a = sample_addr(2);
  for (int count : {0, 5, 255}) {
    Bytes b = a.encode();
    b[addr_count_offset(a)] = static_cast<std::byte>(count);
    EXPECT_TRUE(malformed(NetAddr::decode(resealed(b)))) << "count " << count;
  }
  EXPECT_FALSE(NetAddr::make(Backend::libfabric, "shm", 1, 4096, {}).ok()) << "make with 0 domains";
  std::vector<Bytes> five(5, Bytes(8, std::byte{1}));
  EXPECT_FALSE(NetAddr::make(Backend::libfabric, "shm", 1, 4096, five).ok())
      << "make with 5 domains";
}

TEST(NetAddrWireTest, GroupsRoundTripAndKeepTheirOrder) {
  for (std::size_t groups : {std::size_t{1}, std::size_t{2}, NetAddr::kMaxGroups}) {
    const NetAddr a = sample_addr(3, groups);
    ASSERT_EQ(a.num_groups(), groups);
    ASSERT_EQ(a.num_domains(), 3u);
    auto back = NetAddr::parse(a.to_string());
    ASSERT_OK(back);
    EXPECT_EQ(*back, a);
    for (std::size_t g = 0; g < groups; ++g) {
      for (std::size_t d = 0; d < 3; ++d) {
        const auto want = address_bytes(16 + 8 * ((g * 3 + d) % 4), g * 3 + d);
        const auto got = back->domain_address(g, d);
        EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end()))
            << "group " << g << " domain " << d;
      }
    }
  }
}

TEST(NetAddrWireTest, GroupCountOutsideOneToMaxIsMalformed) {
  const NetAddr a = sample_addr(2);
  for (int groups : {0, static_cast<int>(NetAddr::kMaxGroups) + 1, 255}) {
    Bytes b = a.encode();
    b[addr_groups_offset(a)] = static_cast<std::byte>(groups);
    EXPECT_TRUE(malformed(NetAddr::decode(resealed(b)))) << "groups " << groups;
  }
  {
    // Two groups announced, one group's addresses present: truncated, not a shorter address.
    Bytes b = a.encode();
    b[addr_groups_offset(a)] = std::byte{2};
    EXPECT_TRUE(malformed(NetAddr::decode(resealed(b)))) << "addresses of one group missing";
  }
  std::vector<Bytes> three(3, Bytes(8, std::byte{1}));
  EXPECT_FALSE(NetAddr::make(Backend::libfabric, "shm", 1, 4096, three, 2).ok())
      << "3 addresses in 2 groups";
  EXPECT_FALSE(NetAddr::make(Backend::libfabric, "shm", 1, 4096, three, 0).ok()) << "0 groups";
  EXPECT_THROW((void)a.domain_address(1, 0), std::out_of_range);
  EXPECT_THROW((void)a.domain_address(0, 2), std::out_of_range);
}

TEST(NetAddrWireTest, HugeLengthsAreMalformed) {
  const NetAddr a = sample_addr(2);
  {
    Bytes b = a.encode();
    b[kAddrNameLen] = std::byte{255};
    EXPECT_TRUE(malformed(NetAddr::decode(resealed(b)))) << "provider name length 255";
  }
  {
    Bytes b = a.encode();
    put_u16(b, addr_count_offset(a) + 1, 0xffff);
    EXPECT_TRUE(malformed(NetAddr::decode(resealed(b)))) << "domain address length 65535";
  }
  {
    // A length that fits the input but exceeds the format's limit.
    Bytes b = a.encode();
    const auto count_at = addr_count_offset(a);
    b.resize(count_at + 1);
    b[count_at] = std::byte{1};
    b.push_back(std::byte{0});
    b.push_back(std::byte{0});
    put_u16(b, count_at + 1, NetAddr::kMaxDomainAddressBytes + 1);
    b.resize(b.size() + NetAddr::kMaxDomainAddressBytes + 1 + kCrcBytes, std::byte{7});
    EXPECT_TRUE(malformed(NetAddr::decode(resealed(b)))) << "domain address over kMaxDomainAddressBytes";
  }
  EXPECT_FALSE(NetAddr::make(Backend::libfabric, "shm", 1, 4096,
                             {Bytes(NetAddr::kMaxDomainAddressBytes + 1, std::byte{1})})
                   .ok());
  EXPECT_FALSE(NetAddr::make(Backend::libfabric,
                             std::string(NetAddr::kMaxProviderNameBytes + 1, 'p'), 1, 4096,
                             {Bytes(8, std::byte{1})})
                   .ok());
}

TEST(NetAddrWireTest, ParseRejectsGarbage) {
  const std::string good = sample_addr().to_string();
  const std::vector<std::string> garbage = {"",
                                            "fna3",
                                            "fna3:",
                                            "fna3:0",
                                            "fna3:zz",
                                            "fna3:" + good.substr(5, 11),
                                            good + "0",
                                            good + "00",
                                            good.substr(0, good.size() - 2),
                                            "fmd3:" + good.substr(5),
                                            " " + good,
                                            std::string(100000, 'a'),
                                            "fna3:" + std::string(100000, 'f'),
                                            std::string("fna3:\0\0", 7),
                                            "fna1:" + good.substr(5)};
  for (const auto& text : garbage) {
    EXPECT_TRUE(malformed(NetAddr::parse(text))) << "\"" << text.substr(0, 40) << "\"";
  }
}

TEST(NetAddrWireTest, EveryFlippedByteIsMalformed) {
  const Bytes good = sample_addr(2).encode();
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (auto mask : {std::byte{0x01}, std::byte{0x80}, std::byte{0xff}}) {
      Bytes b = good;
      b[i] ^= mask;
      // CRC-32 catches every error burst of up to 32 bits, so no flipped byte
      // may decode into some other valid NetAddr.
      EXPECT_TRUE(malformed(NetAddr::decode(b))) << "byte " << i << " mask " << int(mask);
    }
  }
}

TEST(NetAddrWireTest, CorruptionAndOldVersionsAreNamedInTheError) {
  Bytes b = sample_addr().encode();
  b[kAddrNameLen + 2] ^= std::byte{0x01};  // one bit of the provider name
  auto r = NetAddr::decode(b);
  ASSERT_TRUE(malformed(r));
  EXPECT_NE(r.status().message().find("checksum"), std::string::npos) << r.status().to_string();
  auto old = NetAddr::parse("fna1:" + sample_addr().to_string().substr(5));
  ASSERT_TRUE(malformed(old));
  EXPECT_NE(old.status().message().find("unsupported version 1"), std::string::npos)
      << old.status().to_string();
}

// ---- MrDesc ----------------------------------------------------------------

TEST(MrDescWireTest, EncodeDecodeRoundTripPreservesEquality) {
  for (std::size_t domains = 1; domains <= NetAddr::kMaxDomains; ++domains) {
    const MrDesc d = sample_desc(domains);
    auto back = MrDesc::decode(d.encode());
    ASSERT_OK(back);
    EXPECT_EQ(*back, d) << domains << " domains";
    EXPECT_EQ(back->owner(), d.owner());
    EXPECT_EQ(back->keys().size(), domains);
  }
}

TEST(MrDescWireTest, ToStringParseRoundTripPreservesEquality) {
  const MrDesc d = sample_desc(4);
  EXPECT_EQ(d.to_string().rfind("fmd3:", 0), 0u) << d.to_string();
  auto back = MrDesc::parse(d.to_string());
  ASSERT_OK(back);
  EXPECT_EQ(*back, d);
}

TEST(MrDescWireTest, EveryTruncationIsMalformed) {
  const Bytes full = sample_desc().encode();
  for (std::size_t n = 0; n < full.size(); ++n) {
    EXPECT_TRUE(malformed(MrDesc::decode(std::span(full).first(n)))) << "first " << n << " bytes";
  }
}

TEST(MrDescWireTest, TrailingBytesAreMalformed) {
  Bytes b = sample_desc().encode();
  b.push_back(std::byte{0});
  EXPECT_TRUE(malformed(MrDesc::decode(b)));
}

TEST(MrDescWireTest, WrongMagicOrVersionIsMalformed) {
  const Bytes good = sample_desc().encode();
  for (std::size_t i = 0; i < 3; ++i) {
    Bytes b = good;
    b[i] ^= std::byte{0x20};
    EXPECT_TRUE(malformed(MrDesc::decode(b))) << "magic byte " << i;
  }
  for (int version : {0, 1, 2, 255}) {
    Bytes b = good;
    b[kDescVersion] = static_cast<std::byte>(version);
    auto r = MrDesc::decode(resealed(b));
    EXPECT_TRUE(malformed(r)) << "version " << version;
    EXPECT_NE(r.status().message().find("unsupported version"), std::string::npos)
        << r.status().to_string();
  }
  EXPECT_TRUE(malformed(MrDesc::decode(sample_addr().encode()))) << "a NetAddr";
}

TEST(MrDescWireTest, InconsistentFieldsAreMalformed) {
  const MrDesc d = sample_desc(2);
  const std::size_t owner_len = d.owner().encode().size();
  const std::size_t count_at = kDescOwner + owner_len + 1;
  for (int count : {0, 1, 3, 5, 255}) {
    Bytes b = d.encode();
    b[count_at] = static_cast<std::byte>(count);
    EXPECT_TRUE(malformed(MrDesc::decode(resealed(b)))) << count << " keys for a 2-domain owner";
  }
  {
    Bytes b = d.encode();
    put_u64(b, kDescLength, ~std::uint64_t{0});
    EXPECT_TRUE(malformed(MrDesc::decode(resealed(b)))) << "base + length overflows";
  }
  {
    Bytes b = d.encode();
    put_u16(b, kDescOwnerLen, 0xffff);
    EXPECT_TRUE(malformed(MrDesc::decode(resealed(b)))) << "owner length 65535";
  }
  {
    Bytes b = d.encode();
    b[kDescOwner] ^= std::byte{0x20};
    EXPECT_TRUE(malformed(MrDesc::decode(resealed(b)))) << "owner with a bad magic";
  }
  EXPECT_FALSE(MrDesc::make(d.owner(), 0x1000, 4096, {{1, 2}}).ok()) << "1 key, 2 domains";
  EXPECT_FALSE(MrDesc::make(NetAddr{}, 0x1000, 4096, {}).ok()) << "empty owner";
}

TEST(MrDescWireTest, TheOwnersGroupRoundTripsAndMustExist) {
  std::vector<RemoteKey> keys = {{0x1000, 1}, {0x2000, 2}};
  const NetAddr owner = sample_addr(2, 3);
  auto d = MrDesc::make(owner, 0x1000, 4096, keys, 2);
  ASSERT_OK(d);
  EXPECT_EQ(d->group(), 2u);
  auto back = MrDesc::parse(d->to_string());
  ASSERT_OK(back);
  EXPECT_EQ(*back, *d);
  EXPECT_EQ(back->group(), 2u);
  EXPECT_NE(*MrDesc::make(owner, 0x1000, 4096, keys, 1), *d) << "another group, another region";
  auto none = MrDesc::make(owner, 0x1000, 4096, keys, 3);
  ASSERT_TRUE(malformed(none)) << "group 3 of 3";
  EXPECT_NE(none.status().message().find("group 3"), std::string::npos) << none.status().to_string();
  Bytes b = d->encode();
  b[kDescOwner + owner.encode().size()] = std::byte{7};
  EXPECT_TRUE(malformed(MrDesc::decode(resealed(b)))) << "group 7 on the wire";
}

TEST(MrDescWireTest, ParseRejectsGarbage) {
  const std::string good = sample_desc().to_string();
  const std::vector<std::string> garbage = {"",
                                            "fmd3",
                                            "fmd3:",
                                            "fmd3:0",
                                            "fmd3:xyz",
                                            good + "0",
                                            good + "00",
                                            good.substr(0, good.size() - 2),
                                            sample_addr().to_string(),
                                            "fmd3:" + hex(sample_addr().encode()),
                                            std::string(100000, 'z'),
                                            "fmd3:" + std::string(100000, '0'),
                                            "fmd1:" + good.substr(5)};
  for (const auto& text : garbage) {
    EXPECT_TRUE(malformed(MrDesc::parse(text))) << "\"" << text.substr(0, 40) << "\"";
  }
}

TEST(MrDescWireTest, EveryFlippedByteIsMalformed) {
  const Bytes good = sample_desc(2).encode();
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (auto mask : {std::byte{0x01}, std::byte{0x80}, std::byte{0xff}}) {
      Bytes b = good;
      b[i] ^= mask;
      // CRC-32 catches every error burst of up to 32 bits, so no flipped byte
      // may decode into some other valid MrDesc.
      EXPECT_TRUE(malformed(MrDesc::decode(b))) << "byte " << i << " mask " << int(mask);
    }
  }
}

TEST(MrDescWireTest, CorruptionAndOldVersionsAreNamedInTheError) {
  Bytes b = sample_desc().encode();
  b[kDescLength] ^= std::byte{0x10};  // the length: would reach past the region
  auto r = MrDesc::decode(b);
  ASSERT_TRUE(malformed(r));
  EXPECT_NE(r.status().message().find("checksum"), std::string::npos) << r.status().to_string();
  auto old = MrDesc::parse("fmd1:" + sample_desc().to_string().substr(5));
  ASSERT_TRUE(malformed(old));
  EXPECT_NE(old.status().message().find("unsupported version 1"), std::string::npos)
      << old.status().to_string();
}

// ---- Real engines, across a process boundary -------------------------------

using WireFormatTest = ProviderTest;

TEST_P(WireFormatTest, EngineAddressAndDescriptorSurviveAProcessBoundary) {
  const EngineConfig cfg = config();
  auto child = test::spawn_child(
      [&](test::Channel& ch) -> int {
        auto engine = child_engine(cfg);
        CHILD_REQUIRE(engine != nullptr, "engine");
        std::vector<std::byte> region(12345);
        auto reg = engine->reg_mr(region.data(), region.size());
        CHILD_REQUIRE_OK(reg.status());
        CHILD_REQUIRE(ch.send_bytes(engine->main_address().encode()) &&
                          ch.send_string(engine->main_address().to_string()) &&
                          ch.send_bytes(reg->desc.encode()) &&
                          ch.send_string(reg->desc.to_string()),
                      ch.last_error());
        CHILD_REQUIRE(ch.expect("bye", kWait), ch.last_error());
        return test::kChildOk;
      },
      kChildLifetime);

  auto& ch = child.channel();
  auto addr_bytes = ch.recv_bytes(kWait);
  auto addr_text = ch.recv_string(kWait);
  auto desc_bytes = ch.recv_bytes(kWait);
  auto desc_text = ch.recv_string(kWait);
  ASSERT_TRUE(desc_text.has_value()) << ch.last_error();

  auto addr = NetAddr::decode(*addr_bytes);
  ASSERT_OK(addr);
  auto addr2 = NetAddr::parse(*addr_text);
  ASSERT_OK(addr2);
  EXPECT_EQ(*addr, *addr2);
  EXPECT_EQ(addr->encode(), *addr_bytes);
  EXPECT_EQ(addr->num_domains(), 1u);
  EXPECT_NE(addr->max_message_size(), 0u);

  auto desc = MrDesc::decode(*desc_bytes);
  ASSERT_OK(desc);
  auto desc2 = MrDesc::parse(*desc_text);
  ASSERT_OK(desc2);
  EXPECT_EQ(*desc, *desc2);
  EXPECT_EQ(desc->encode(), *desc_bytes);
  EXPECT_EQ(desc->owner(), *addr) << "an MrDesc names its owner's NetAddr";
  EXPECT_EQ(desc->size(), 12345u);
  EXPECT_EQ(desc->keys().size(), addr->num_domains());

  EXPECT_TRUE(ch.send_string("bye"));
  const auto exit = child.wait_exit(kWait);
  EXPECT_TRUE(exit.ok()) << exit.to_string();
}

FABRIC_INSTANTIATE_PROVIDERS(WireFormatTest);

}  // namespace
}  // namespace fabric::conformance
