// SEND/RECV between two processes: every message arrives once and intact,
// and size limits are enforced at submission.

#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "fabric_test/data.hpp"
#include "fabric_test/sync.hpp"
#include "fixture.hpp"

namespace fabric::conformance {
namespace {

using test::Channel;

// Each message is self-describing so the receiver can check it regardless of
// arrival order: [seq u32][len u32][payload = fill_random(seed + seq)].
constexpr std::size_t kHeader = 8;
constexpr std::uint64_t kPayloadSeed = 0xa11ce000;

void build_message(std::vector<std::byte>& out, std::uint32_t seq, std::uint32_t len) {
  out.resize(len);
  std::memcpy(out.data(), &seq, 4);
  std::memcpy(out.data() + 4, &len, 4);
  test::fill_random(std::span(out).subspan(kHeader), kPayloadSeed + seq);
}

// Checks one received message; returns "" or what is wrong with it.
std::string check_message(std::span<const std::byte> data, std::uint32_t& seq) {
  if (data.size() < kHeader) return "message of " + std::to_string(data.size()) + " bytes";
  std::uint32_t len = 0;
  std::memcpy(&seq, data.data(), 4);
  std::memcpy(&len, data.data() + 4, 4);
  if (len != data.size()) {
    return "message " + std::to_string(seq) + " has " + std::to_string(data.size()) +
           " bytes, header says " + std::to_string(len);
  }
  std::vector<std::byte> expected;
  build_message(expected, seq, len);
  auto eq = test::bytes_equal(data, expected);
  return eq ? "" : "message " + std::to_string(seq) + ": " + eq.message();
}

// Collects what the receive callback sees (on the engine's callback thread).
struct Inbox {
  std::mutex mutex;
  std::multiset<std::uint32_t> seqs;
  std::vector<std::string> errors;
  test::WaitableCount arrived;

  void on_recv(std::span<const std::byte> data) {
    std::uint32_t seq = 0;
    std::string error = check_message(data, seq);
    {
      std::lock_guard lock(mutex);
      if (error.empty()) {
        seqs.insert(seq);
      } else {
        errors.push_back(std::move(error));
      }
    }
    arrived.add();
  }
};

using SendRecvTest = ProviderTest;

TEST_P(SendRecvTest, ManyMessagesOfRandomSizesArriveOnceAndIntact) {
  constexpr std::uint32_t kMessages = 500;
  const EngineConfig cfg = config();
  const std::uint32_t max_size = cfg.max_message_size;

  auto child = test::spawn_child(
      [&](Channel& ch) -> int {
        auto engine = child_engine(cfg);
        CHILD_REQUIRE(engine != nullptr, "sender engine");
        auto to = ch.recv_addr(kWait);
        CHILD_REQUIRE(to.has_value(), ch.last_error());
        auto counter = std::make_shared<CompletionCounter>();
        std::uint64_t rng = 0x5eed;
        // One buffer reused at once for every message: submit_send must copy.
        std::vector<std::byte> message;
        std::uint64_t submitted = 0;
        for (std::uint32_t seq = 0; seq < kMessages; ++seq) {
          std::uint32_t len = kHeader + static_cast<std::uint32_t>(test::splitmix64(rng) %
                                                                   (max_size - kHeader + 1));
          if (seq == 0) len = kHeader;
          if (seq == 1) len = max_size;
          build_message(message, seq, len);
          const Status st =
              test::submit_with_retry([&] { return engine->submit_send(*to, message, counter); });
          CHILD_REQUIRE_OK(st);
          ++submitted;
          std::memset(message.data(), 0xEE, message.size());
        }
        CHILD_REQUIRE_OK(counter->wait(submitted, kWait));
        CHILD_REQUIRE(ch.send_pod(counter->completed()), ch.last_error());
        CHILD_REQUIRE(ch.expect("bye", kWait), ch.last_error());
        return test::kChildOk;
      },
      kChildLifetime);

  ASSERT_ENGINE(engine, cfg);
  Inbox inbox;
  const StopGuard stop_guard(engine.get());
  ASSERT_OK(
      engine->submit_recvs(max_size, 64, [&](std::span<const std::byte> d) { inbox.on_recv(d); }));
  ASSERT_TRUE(child.channel().send_addr(engine->main_address())) << child.channel().last_error();

  auto sender_completed = child.channel().recv_pod<std::uint64_t>(kWait + kWait);
  ASSERT_TRUE(sender_completed.has_value()) << child.channel().last_error();
  EXPECT_EQ(*sender_completed, kMessages) << "sender-side completions";
  ASSERT_TRUE(inbox.arrived.wait_for(kMessages, kWait))
      << "only " << inbox.arrived.value() << " of " << kMessages << " messages arrived";
  EXPECT_TRUE(child.channel().send_string("bye"));
  const auto exit = child.wait_exit(kWait);
  EXPECT_TRUE(exit.ok()) << "sender " << exit.to_string();
  engine->stop();

  std::lock_guard lock(inbox.mutex);
  EXPECT_TRUE(inbox.errors.empty())
      << inbox.errors.size() << " corrupt messages, first: " << inbox.errors.front();
  EXPECT_EQ(inbox.seqs.size(), kMessages);
  for (std::uint32_t seq = 0; seq < kMessages; ++seq) {
    EXPECT_EQ(inbox.seqs.count(seq), 1u) << "message " << seq;
  }
}

TEST_P(SendRecvTest, MessageOverReceiversMaxIsRejectedAtSubmitAndNotDelivered) {
  // The receiver advertises a smaller limit than the sender's own, so only
  // the receiver's NetAddr can be what rejects the message.
  EngineConfig receiver_cfg = config();
  receiver_cfg.max_message_size = 16 * 1024;
  const EngineConfig sender_cfg = config();

  auto child = test::spawn_child(
      [&](Channel& ch) -> int {
        auto engine = child_engine(sender_cfg);
        CHILD_REQUIRE(engine != nullptr, "sender engine");
        auto to = ch.recv_addr(kWait);
        CHILD_REQUIRE(to.has_value(), ch.last_error());
        CHILD_REQUIRE(to->max_message_size() == 16 * 1024,
                      "advertised max " + std::to_string(to->max_message_size()));
        std::vector<std::byte> big(to->max_message_size() + 1, std::byte{0x42});
        auto flag = std::make_shared<CompletionFlag>();
        CHILD_REQUIRE(ch.send_status(engine->submit_send(*to, big, flag)), ch.last_error());
        // A marker that must be the only message the receiver ever sees.
        std::vector<std::byte> marker(kHeader);
        build_message(marker, 7, kHeader);
        auto marker_flag = std::make_shared<CompletionFlag>();
        CHILD_REQUIRE_OK(engine->submit_send(*to, marker, marker_flag));
        CHILD_REQUIRE_OK(marker_flag->wait(kWait));
        CHILD_REQUIRE(ch.send_pod<std::uint8_t>(flag->done() ? 1 : 0), ch.last_error());
        CHILD_REQUIRE(ch.expect("bye", kWait), ch.last_error());
        return test::kChildOk;
      },
      kChildLifetime);

  ASSERT_ENGINE(engine, receiver_cfg);
  Inbox inbox;
  const StopGuard stop_guard(engine.get());
  ASSERT_OK(engine->submit_recvs(receiver_cfg.max_message_size, 8,
                                 [&](std::span<const std::byte> d) { inbox.on_recv(d); }));
  ASSERT_TRUE(child.channel().send_addr(engine->main_address())) << child.channel().last_error();

  auto oversize = child.channel().recv_status(kWait);
  ASSERT_TRUE(oversize.has_value()) << child.channel().last_error();
  EXPECT_EQ(oversize->code(), Errc::invalid_argument) << oversize->to_string();
  auto flag_fired = child.channel().recv_pod<std::uint8_t>(kWait);
  ASSERT_TRUE(flag_fired.has_value()) << child.channel().last_error();
  EXPECT_EQ(*flag_fired, 0) << "on_done of a rejected submission was called";

  ASSERT_TRUE(inbox.arrived.wait_for(1, kWait)) << "the marker message never arrived";
  EXPECT_FALSE(inbox.arrived.wait_for(2, kQuiet)) << "more than the marker arrived";
  EXPECT_TRUE(child.channel().send_string("bye"));
  const auto exit = child.wait_exit(kWait);
  EXPECT_TRUE(exit.ok()) << "sender " << exit.to_string();
  engine->stop();
  std::lock_guard lock(inbox.mutex);
  EXPECT_TRUE(inbox.errors.empty()) << inbox.errors.front();
  EXPECT_EQ(inbox.seqs, std::multiset<std::uint32_t>{7});
}

TEST_P(SendRecvTest, RecvBuffersSmallerThanMaxMessageAreRejected) {
  ASSERT_ENGINE(engine, config());
  const std::size_t max = engine->config().max_message_size;
  const Status st = engine->submit_recvs(max - 1, 4, [](std::span<const std::byte>) {});
  EXPECT_FALSE(st.ok()) << "submit_recvs(len = max_message_size - 1) was accepted";
  EXPECT_EQ(st.code(), Errc::invalid_argument) << st.to_string();
}

FABRIC_INSTANTIATE_PROVIDERS(SendRecvTest);

}  // namespace
}  // namespace fabric::conformance
