// The verbs backend's address and handshake formats: round trips, exact
// sizes, and rejection of every truncation, extension and bad field.

#include <gtest/gtest.h>

#include "verbs/wire_format.hpp"

namespace fabric::verbs {
namespace {

VerbsAddress sample_address() {
  VerbsAddress a;
  for (std::size_t i = 0; i < a.gid.size(); ++i) a.gid[i] = static_cast<std::uint8_t>(0xa0 + i);
  a.lid = 0x1234;
  a.mtu = 3;
  a.ud_qpn = 0x00abcd;
  a.nonce = 0x0102030405060708ull;
  return a;
}

Handshake sample_handshake() {
  Handshake h;
  h.type = Handshake::Type::reply;
  h.conn_id = 0xfeedfacecafebeefull;
  h.sender = sample_address();
  h.receiver_nonce = 0x1111222233334444ull;
  h.msg_qpn = 0x11;
  h.write_qpn = 0x12;
  h.msg_psn = 0xfffffe;
  h.write_psn = 0x10000;
  return h;
}

TEST(VerbsWire, AddressRoundTripsAtItsDocumentedSize) {
  const auto bytes = sample_address().encode();
  EXPECT_EQ(bytes.size(), VerbsAddress::kBytes);
  auto decoded = VerbsAddress::decode(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, sample_address());
}

TEST(VerbsWire, HandshakeRoundTripsAtItsDocumentedSize) {
  const auto bytes = sample_handshake().encode();
  EXPECT_EQ(bytes.size(), Handshake::kBytes);
  auto decoded = Handshake::decode(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, sample_handshake());
}

TEST(VerbsWire, EveryTruncationAndExtensionIsMalformed) {
  const auto address = sample_address().encode();
  const auto handshake = sample_handshake().encode();
  for (std::size_t n = 0; n < address.size(); ++n) {
    EXPECT_EQ(VerbsAddress::decode(std::span(address).first(n)).status().code(), Errc::malformed);
  }
  for (std::size_t n = 0; n < handshake.size(); ++n) {
    EXPECT_EQ(Handshake::decode(std::span(handshake).first(n)).status().code(), Errc::malformed);
  }
  auto longer = address;
  longer.push_back(std::byte{0});
  EXPECT_EQ(VerbsAddress::decode(longer).status().code(), Errc::malformed);
}

TEST(VerbsWire, BadFieldsAreRejectedWithTheirName) {
  auto corrupt = [](std::vector<std::byte> bytes, std::size_t at, std::uint8_t value) {
    bytes[at] = std::byte{value};
    return bytes;
  };
  const auto address = sample_address().encode();
  EXPECT_FALSE(VerbsAddress::decode(corrupt(address, 0, 'X')).ok()) << "magic";
  auto version = VerbsAddress::decode(corrupt(address, 3, 2));
  ASSERT_FALSE(version.ok());
  EXPECT_NE(version.status().message().find("version 2"), std::string::npos);
  EXPECT_FALSE(VerbsAddress::decode(corrupt(address, 22, 0)).ok()) << "MTU code 0";
  EXPECT_FALSE(VerbsAddress::decode(corrupt(address, 22, 6)).ok()) << "MTU code 6";
  EXPECT_FALSE(VerbsAddress::decode(corrupt(address, 23, 1)).ok()) << "reserved byte";
  EXPECT_FALSE(VerbsAddress::decode(corrupt(address, 27, 1)).ok()) << "QPN over 24 bits";

  const auto handshake = sample_handshake().encode();
  EXPECT_FALSE(Handshake::decode(corrupt(handshake, 4, 3)).ok()) << "message type";
  EXPECT_FALSE(Handshake::decode(corrupt(handshake, 5, 1)).ok()) << "reserved";
  EXPECT_FALSE(Handshake::decode(corrupt(handshake, 16, 'X')).ok()) << "embedded address magic";
  EXPECT_FALSE(Handshake::decode(corrupt(handshake, 63, 1)).ok()) << "msg QPN over 24 bits";
}

}  // namespace
}  // namespace fabric::verbs
