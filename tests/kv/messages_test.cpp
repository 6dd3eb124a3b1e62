// The KV messages: every type round-trips, and every truncation or corruption of a valid message
// is a clear Errc::malformed, never a crash.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fabric/kv/layout.hpp"
#include "messages.hpp"

namespace fabric::kv::msg {
namespace {

NetAddr addr() {
  auto a = NetAddr::make(Backend::libfabric, "tcp;ofi_rxm", 0x1234, 65536,
                         {std::vector<std::byte>(16, std::byte{7})});
  return a.value();
}

MrDesc desc() { return MrDesc::make(addr(), 0x1000, 4096, {RemoteKey{0x1000, 42}}).value(); }

KvLayout layout() { return vllm_cpu({2, 8, 32, 4, {0, 4}, 32, 2}); }

std::vector<Body> samples() {
  Request q;
  q.id = "req-7";
  q.imm = 99;
  q.fingerprint = layout().fingerprint();
  q.num_tokens = 70;
  q.src_first = 64;
  q.heads = {1, 3};
  q.expected_imms = 17;
  q.writes_tail = true;
  q.tail = desc();
  q.tail_offset = 8;
  q.tail_bytes = 64;
  q.pages = {5, 1, 7};
  return {Hello{addr(), layout(), {desc(), desc()}}, HelloAck{addr(), layout()}, q,
          Accept{"a"}, Reject{"r", Status(Errc::out_of_range, "page 9")},
          SenderDone{"d", Status::success()}, Cancel{"c"}, CancelAck{"c"}, Heartbeat{}, Decline{"x"}};
}

TEST(KvMessages, RoundTrip) {
  for (const Body& b : samples()) {
    auto bytes = encode(77, b);
    auto m = decode(bytes);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ(m->from_instance, 77u);
    EXPECT_EQ(m->body.index(), b.index());
    EXPECT_EQ(encode(77, m->body), bytes);
  }
  auto m = decode(encode(1, samples()[2]));
  const auto& q = std::get<Request>(m->body);
  EXPECT_EQ(q.pages, (std::vector<std::uint32_t>{5, 1, 7}));
  EXPECT_EQ(q.tail, desc());
  EXPECT_EQ(q.heads, (HeadRange{1, 3}));
  EXPECT_EQ(q.src_first, 64u);
}

TEST(KvMessages, TruncatedOrExtendedIsMalformed) {
  for (const Body& b : samples()) {
    auto bytes = encode(5, b);
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      auto m = decode(std::span(bytes).first(n));
      ASSERT_FALSE(m.ok()) << "type " << b.index() << " cut at " << n;
      EXPECT_EQ(m.status().code(), Errc::malformed);
    }
    bytes.push_back(std::byte{0});
    EXPECT_EQ(decode(bytes).status().code(), Errc::malformed);
  }
}

TEST(KvMessages, WrongVersionMagicOrLayoutIsMalformed) {
  auto bytes = encode(5, samples()[0]);
  auto v = bytes;
  v[3] = std::byte{kVersion + 1};  // a newer peer
  EXPECT_NE(decode(v).status().message().find(fmt::format("version {}", kVersion + 1)),
            std::string::npos);
  v[3] = std::byte{1};  // version 1 had no src_first in REQUEST
  EXPECT_EQ(decode(v).status().code(), Errc::malformed);
  auto mg = bytes;
  mg[0] = std::byte{'X'};
  EXPECT_EQ(decode(mg).status().code(), Errc::malformed);
  Hello h{addr(), layout(), {desc(), desc()}};
  h.layout.token_stride = 1;  // overlapping entries
  auto m = decode(encode(5, h));
  EXPECT_EQ(m.status().code(), Errc::malformed);
  EXPECT_NE(m.status().message().find("invalid layout"), std::string::npos);
  // Flipping any single byte never crashes.
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    auto f = bytes;
    f[i] ^= std::byte{0xff};
    (void)decode(f);
  }
}

}  // namespace
}  // namespace fabric::kv::msg
