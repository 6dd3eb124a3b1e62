// Named channels (fabric/channel.hpp) between two processes: each message reaches only the
// channel it was sent on, says which engine sent it, and can be answered; a message for a channel
// not open is counted and dropped; the bad inputs fail naming the channel.

#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "fabric_test/sync.hpp"
#include "fixture.hpp"

namespace fabric::conformance {
namespace {

using Control = test::Channel;  // the test's own control socket, not a fabric::Channel

constexpr std::uint32_t kThreads = 4;
constexpr std::uint32_t kPerThread = 200;
const std::array<std::string, 2> kNames = {"alpha", "beta"};

// [u32 thread][u32 seq][u8 tag = index of the channel it was sent on][filler]
std::vector<std::byte> make_message(std::uint32_t thread, std::uint32_t seq, std::uint8_t tag) {
  std::vector<std::byte> m(9 + (seq % 64), std::byte{tag});
  std::memcpy(m.data(), &thread, 4);
  std::memcpy(m.data() + 4, &seq, 4);
  return m;
}

// Bounded: polls a counter the engine moves on its own threads.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = kWait) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

struct Inbox {
  std::mutex mutex;
  std::set<std::tuple<std::size_t, std::uint32_t, std::uint32_t>> seen;  // channel, thread, seq
  std::vector<std::string> errors;
  std::optional<NetAddr> first_sender;
  test::WaitableCount arrived;

  void on(std::size_t channel, const ChannelMessage& m, const NetAddr& expected_sender) {
    std::string error;
    std::uint32_t thread = 0, seq = 0;
    if (m.channel != kNames[channel]) {
      error = "callback of '" + kNames[channel] + "' got a message naming '" +
              std::string(m.channel) + "'";
    } else if (m.data.size() < 9) {
      error = "message of " + std::to_string(m.data.size()) + " bytes";
    } else {
      std::memcpy(&thread, m.data.data(), 4);
      std::memcpy(&seq, m.data.data() + 4, 4);
      if (m.data.size() != 9 + (seq % 64)) error = "message " + std::to_string(seq) + " cut";
      for (std::size_t i = 8; i < m.data.size() && error.empty(); ++i) {
        if (m.data[i] != std::byte(channel)) {
          error = "'" + kNames[channel] + "' got a message sent on the other channel";
        }
      }
      if (!(m.sender == expected_sender)) error = "sender is " + m.sender.describe();
    }
    {
      std::lock_guard lock(mutex);
      if (!first_sender) first_sender = m.sender;
      if (!error.empty()) {
        errors.push_back(error);
      } else if (!seen.emplace(channel, thread, seq).second) {
        errors.push_back("duplicate message " + std::to_string(seq));
      }
    }
    arrived.add();
  }
};

using ChannelTest = ProviderTest;

TEST_P(ChannelTest, MessagesFromSeveralThreadsReachOnlyTheirChannelWithTheSenderAndCanBeAnswered) {
  const EngineConfig cfg = config();
  auto child = test::spawn_child(
      [&](Control& ctl) -> int {
        auto engine = child_engine(cfg);
        CHILD_REQUIRE(engine != nullptr, "sender engine");
        auto to = ctl.recv_addr(kWait);
        CHILD_REQUIRE(to.has_value(), ctl.last_error());
        CHILD_REQUIRE(ctl.send_addr(engine->main_address()), ctl.last_error());
        test::WaitableCount replies;
        std::string reply_error;
        auto alpha = engine->channel(kNames[0], [&](const ChannelMessage& m) {
          if (!(m.sender == *to)) reply_error = "reply from " + m.sender.describe();
          if (std::string(reinterpret_cast<const char*>(m.data.data()), m.data.size()) != "pong") {
            reply_error = "reply is not 'pong'";
          }
          replies.add();
        });
        CHILD_REQUIRE_OK(alpha.status());
        auto beta = engine->channel(kNames[1], [](const ChannelMessage&) {});
        CHILD_REQUIRE_OK(beta.status());
        std::array<fabric::Channel*, 2> channels = {&alpha.value(), &beta.value()};
        auto counter = std::make_shared<CompletionCounter>();
        std::vector<std::thread> threads;
        std::array<Status, kThreads> failed;
        for (std::uint32_t t = 0; t < kThreads; ++t) {
          threads.emplace_back([&, t] {
            for (std::uint32_t seq = 0; seq < kPerThread && failed[t].ok(); ++seq) {
              const std::uint8_t tag = (seq + t) % 2;
              const auto m = make_message(t, seq, tag);
              failed[t] = test::submit_with_retry(
                  [&] { return channels[tag]->send(*to, m, counter); });
            }
          });
        }
        for (auto& th : threads) th.join();
        for (const auto& st : failed) CHILD_REQUIRE_OK(st);
        CHILD_REQUIRE_OK(counter->wait(kThreads * kPerThread, kWait));
        CHILD_REQUIRE(replies.wait_for(1, kWait), "no reply on 'alpha'");
        CHILD_REQUIRE(reply_error.empty(), reply_error);
        CHILD_REQUIRE(ctl.send_string("answered"), ctl.last_error());
        CHILD_REQUIRE(ctl.expect("bye", kWait), ctl.last_error());
        return test::kChildOk;
      },
      kChildLifetime);

  ASSERT_ENGINE(engine, cfg);
  ASSERT_TRUE(child.channel().send_addr(engine->main_address()));
  auto child_addr = child.channel().recv_addr(kWait);
  ASSERT_TRUE(child_addr.has_value()) << child.channel().last_error();
  Inbox inbox;
  const StopGuard stop_guard(engine.get());
  auto alpha = engine->channel(kNames[0], [&](const ChannelMessage& m) { inbox.on(0, m, *child_addr); });
  ASSERT_OK(alpha.status());
  auto beta = engine->channel(kNames[1], [&](const ChannelMessage& m) { inbox.on(1, m, *child_addr); });
  ASSERT_OK(beta.status());

  ASSERT_TRUE(inbox.arrived.wait_for(kThreads * kPerThread, kWait))
      << "only " << inbox.arrived.value() << " of " << kThreads * kPerThread << " arrived";
  NetAddr reply_to;
  {
    std::lock_guard lock(inbox.mutex);
    ASSERT_TRUE(inbox.errors.empty()) << inbox.errors.size() << " wrong, first: " << inbox.errors.front();
    ASSERT_EQ(inbox.seen.size(), kThreads * kPerThread);
    for (std::uint32_t t = 0; t < kThreads; ++t) {
      for (std::uint32_t seq = 0; seq < kPerThread; ++seq) {
        EXPECT_EQ(inbox.seen.count({(seq + t) % 2, t, seq}), 1u) << "thread " << t << " seq " << seq;
      }
    }
    reply_to = *inbox.first_sender;  // the address the message carried, nothing out of band
  }
  const std::string pong = "pong";
  auto done = std::make_shared<CompletionFlag>();
  ASSERT_OK(alpha->send(reply_to, std::as_bytes(std::span(pong)), done));
  ASSERT_OK(done->wait(kWait));
  EXPECT_TRUE(child.channel().expect("answered", kWait)) << child.channel().last_error();
  EXPECT_EQ(engine->metrics().messages_unrouted, 0u);
  EXPECT_TRUE(child.channel().send_string("bye"));
  const auto exit = child.wait_exit(kWait);
  EXPECT_TRUE(exit.ok()) << "sender " << exit.to_string();
}

TEST_P(ChannelTest, MessagesForAChannelNotOpenOrClosedAreCountedAndDroppedNotDelivered) {
  const EngineConfig cfg = config();
  auto child = test::spawn_child(
      [&](Control& ctl) -> int {
        auto engine = child_engine(cfg);
        CHILD_REQUIRE(engine != nullptr, "sender engine");
        auto to = ctl.recv_addr(kWait);
        CHILD_REQUIRE(to.has_value(), ctl.last_error());
        CHILD_REQUIRE(ctl.expect("go", kWait), ctl.last_error());
        auto counter = std::make_shared<CompletionCounter>();
        std::vector<fabric::Channel> open;
        for (const char* name : {"ghost", "beta", "alpha"}) {
          auto ch = engine->channel(name, [](const ChannelMessage&) {});
          CHILD_REQUIRE_OK(ch.status());
          const std::string text = name;
          CHILD_REQUIRE_OK(ch->send(*to, std::as_bytes(std::span(text)), counter));
          open.push_back(std::move(ch).value());
        }
        CHILD_REQUIRE_OK(counter->wait(3, kWait));
        CHILD_REQUIRE(ctl.expect("bye", kWait), ctl.last_error());
        return test::kChildOk;
      },
      kChildLifetime);

  ASSERT_ENGINE(engine, cfg);
  test::WaitableCount alpha_got, beta_got;
  const StopGuard stop_guard(engine.get());
  auto alpha = engine->channel("alpha", [&](const ChannelMessage&) { alpha_got.add(); });
  ASSERT_OK(alpha.status());
  // What beta's callback holds is let go when beta closes, not when the handle goes.
  auto held = std::make_shared<int>(0);
  auto beta = engine->channel("beta", [&, held](const ChannelMessage&) { beta_got.add(); });
  ASSERT_OK(beta.status());
  beta->close();
  EXPECT_FALSE(beta->is_open());
  EXPECT_EQ(held.use_count(), 1) << "closing 'beta' kept its callback";
  ASSERT_TRUE(child.channel().send_addr(engine->main_address()));
  ASSERT_TRUE(child.channel().send_string("go"));

  ASSERT_TRUE(alpha_got.wait_for(1, kWait)) << "the message on 'alpha' never arrived";
  EXPECT_TRUE(eventually([&] { return engine->metrics().messages_unrouted >= 2; }))
      << "unrouted: " << engine->metrics().messages_unrouted;
  EXPECT_FALSE(alpha_got.wait_for(2, kQuiet)) << "'alpha' got another channel's message";
  EXPECT_EQ(engine->metrics().messages_unrouted, 2u);
  EXPECT_EQ(beta_got.value(), 0u) << "a closed channel's callback ran";
  EXPECT_TRUE(child.channel().send_string("bye"));
  const auto exit = child.wait_exit(kWait);
  EXPECT_TRUE(exit.ok()) << "sender " << exit.to_string();
}

TEST_P(ChannelTest, ANameOpenTwiceIsRefusedNamingItAndFreeAgainOnceClosed) {
  ASSERT_ENGINE(engine, config());
  auto first = engine->channel("kv", [](const ChannelMessage&) {});
  ASSERT_OK(first.status());
  auto again = engine->channel("kv", [](const ChannelMessage&) {});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Errc::invalid_argument);
  EXPECT_NE(again.status().message().find("'kv'"), std::string::npos) << again.status().to_string();
  { fabric::Channel gone = std::move(first).value(); }  // destroyed: closed
  EXPECT_OK(engine->channel("kv", [](const ChannelMessage&) {}).status());
  EXPECT_EQ(engine->channel("", [](const ChannelMessage&) {}).status().code(), Errc::invalid_argument);
  EXPECT_EQ(engine->channel("nocb", {}).status().code(), Errc::invalid_argument);
}

TEST_P(ChannelTest, AMessageOverTheChannelsMaxIsRefusedNamingTheChannel) {
  ASSERT_ENGINE(engine, config());
  auto small = engine->channel("small", [](const ChannelMessage&) {}, ChannelOptions{100});
  ASSERT_OK(small.status());
  EXPECT_EQ(small->max_message_size(), 100u);
  std::vector<std::byte> big(101);
  auto flag = std::make_shared<CompletionFlag>();
  const Status st = small->send(engine->main_address(), big, flag);
  EXPECT_EQ(st.code(), Errc::invalid_argument);
  EXPECT_NE(st.message().find("'small'"), std::string::npos) << st.to_string();
  EXPECT_FALSE(flag->done());

  // The default leaves room for the header inside the engine's max_message_size.
  auto full = engine->channel("full", [](const ChannelMessage&) {});
  ASSERT_OK(full.status());
  EXPECT_LT(full->max_message_size(), engine->config().max_message_size);
  std::vector<std::byte> over(full->max_message_size() + 1);
  EXPECT_EQ(full->send(engine->main_address(), over, flag).code(), Errc::invalid_argument);
  auto too_big = engine->channel("huge", [](const ChannelMessage&) {},
                                 ChannelOptions{engine->config().max_message_size});
  EXPECT_EQ(too_big.status().code(), Errc::invalid_argument);
  EXPECT_NE(too_big.status().message().find("'huge'"), std::string::npos);

  full->close();
  const Status closed = full->send(engine->main_address(), big, flag);
  EXPECT_EQ(closed.code(), Errc::invalid_argument);
  EXPECT_NE(closed.message().find("'full' is closed"), std::string::npos) << closed.to_string();
}

TEST_P(ChannelTest, RawReceivePoolsAndChannelsAreNotMixedOnOneEngine) {
  ASSERT_ENGINE(raw, config());
  ASSERT_OK(raw->submit_recvs(raw->config().max_message_size, 4, [](std::span<const std::byte>) {}));
  EXPECT_EQ(raw->channel("kv", [](const ChannelMessage&) {}).status().code(), Errc::invalid_argument);
  ASSERT_ENGINE(routed, config());
  ASSERT_OK(routed->channel("kv", [](const ChannelMessage&) {}).status());
  EXPECT_EQ(routed->submit_recvs(routed->config().max_message_size, 4,
                                 [](std::span<const std::byte>) {}).code(),
            Errc::invalid_argument);
}

TEST(ChannelId, IsFnv1aOfTheNameSoEveryEngineAgrees) {
  EXPECT_EQ(channel_id(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(channel_id("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_NE(channel_id("kv"), channel_id("weights"));
}

FABRIC_INSTANTIATE_PROVIDERS(ChannelTest);

}  // namespace
}  // namespace fabric::conformance
