// Peer liveness as an engine service (fabric/peer_watch.hpp) between two processes: a watched
// peer whose engine answers stays alive, goes silent while its process is stopped, is alive
// again when it resumes (a stopped process is not a dead one) and silent once killed; several
// watchers of one peer each get their own verdicts; bad input is refused naming what is wrong.

#include <signal.h>

#include <mutex>
#include <vector>

#include "fabric_test/sync.hpp"
#include "fixture.hpp"

namespace fabric::conformance {
namespace {

using namespace std::chrono_literals;
using Control = test::Channel;  // the test's own control socket, not a fabric::Channel

// Silent after 3 s: a loaded 2-core host delays answers by far less, a SIGSTOP by more.
constexpr PeerWatchOptions kFast{100ms, 3000ms};

// The states one watch reported, in order.
struct Verdicts {
  std::mutex mutex;
  std::vector<PeerState> seen;
  test::WaitableCount count;

  PeerStateCallback callback() {
    return [this](const NetAddr&, PeerState state) {
      {
        std::lock_guard lock(mutex);
        seen.push_back(state);
      }
      count.add();
    };
  }
  std::vector<PeerState> snapshot() {
    std::lock_guard lock(mutex);
    return seen;
  }
};

// A peer process whose engine has a channel open (so it answers pings) until told "bye".
test::ChildProcess answering_peer(const EngineConfig& cfg) {
  return test::spawn_child(
      [cfg](Control& ctl) -> int {
        auto engine = child_engine(cfg);
        CHILD_REQUIRE(engine != nullptr, "peer engine");
        auto work = engine->channel("work", [](const ChannelMessage&) {});
        CHILD_REQUIRE_OK(work.status());
        CHILD_REQUIRE(ctl.send_addr(engine->main_address()), ctl.last_error());
        CHILD_REQUIRE(ctl.expect("bye", 120s), ctl.last_error());
        return test::kChildOk;
      },
      kChildLifetime);
}

using PeerWatchTest = ProviderTest;

TEST_P(PeerWatchTest, AStoppedPeerIsSilentThenAliveAgainWhenItResumesAndSilentOnceKilled) {
  const EngineConfig cfg = config();
  auto child = answering_peer(cfg);
  auto peer = child.channel().recv_addr(kWait);
  ASSERT_TRUE(peer.has_value()) << child.channel().last_error();
  ASSERT_ENGINE(engine, cfg);
  Verdicts verdicts;
  const StopGuard stop_guard(engine.get());
  auto watch = engine->watch_peer(*peer, verdicts.callback(), kFast);
  ASSERT_OK(watch.status());
  EXPECT_EQ(watch->silent_after(), 3000ms);
  const auto began = watch->last_heard();
  // Answers arrive: last_heard moves on, and no verdict is reported while they do.
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (watch->last_heard() <= began && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_GT(watch->last_heard(), began) << "no answer to a ping";
  EXPECT_EQ(watch->state(), PeerState::alive);

  ASSERT_EQ(::kill(child.pid(), SIGSTOP), 0);
  const bool went_silent = verdicts.count.wait_for(1, kWait);
  ASSERT_EQ(::kill(child.pid(), SIGCONT), 0);  // before any check: never leave it stopped
  ASSERT_TRUE(went_silent) << "a stopped peer was never reported silent";
  ASSERT_TRUE(verdicts.count.wait_for(2, kWait)) << "the resumed peer was never alive again";
  EXPECT_EQ(verdicts.snapshot(), (std::vector<PeerState>{PeerState::silent, PeerState::alive}));
  EXPECT_EQ(watch->state(), PeerState::alive);

  (void)child.kill();
  ASSERT_TRUE(verdicts.count.wait_for(3, kWait)) << "a killed peer was never reported silent";
  EXPECT_EQ(verdicts.snapshot().back(), PeerState::silent);
  EXPECT_EQ(watch->state(), PeerState::silent);
}

TEST_P(PeerWatchTest, EachWatcherOfOnePeerGetsItsOwnVerdictsAndAClosedOneNoMore) {
  const EngineConfig cfg = config();
  auto child = answering_peer(cfg);
  auto peer = child.channel().recv_addr(kWait);
  ASSERT_TRUE(peer.has_value()) << child.channel().last_error();
  ASSERT_ENGINE(engine, cfg);
  Verdicts quick, patient, closed;
  const StopGuard stop_guard(engine.get());
  auto a = engine->watch_peer(*peer, quick.callback(), kFast);
  ASSERT_OK(a.status());
  // Silent only after 60 s: it sees the same pings but must not give the peer up this soon.
  auto b = engine->watch_peer(*peer, patient.callback(), {100ms, 60000ms});
  ASSERT_OK(b.status());
  auto c = engine->watch_peer(*peer, closed.callback(), kFast);
  ASSERT_OK(c.status());
  c->close();
  EXPECT_FALSE(c->is_open());

  ASSERT_EQ(::kill(child.pid(), SIGSTOP), 0);
  const bool went_silent = quick.count.wait_for(1, kWait);
  ASSERT_EQ(::kill(child.pid(), SIGCONT), 0);
  ASSERT_TRUE(went_silent);
  ASSERT_TRUE(quick.count.wait_for(2, kWait));
  EXPECT_EQ(patient.count.value(), 0u) << "a 60 s bound reported a pause of a few seconds";
  EXPECT_EQ(b->state(), PeerState::alive);
  EXPECT_EQ(closed.count.value(), 0u) << "a closed watch was called";

  // Closing the other watchers leaves the one still open served.
  a->close();
  EXPECT_EQ(b->state(), PeerState::alive);
  EXPECT_TRUE(child.channel().send_string("bye"));
  EXPECT_TRUE(child.wait_exit(kWait).ok());
}

TEST_P(PeerWatchTest, BadWatchesAndReservedChannelNamesAreRefusedNamingTheProblem) {
  const EngineConfig cfg = config();
  ASSERT_ENGINE(engine, cfg);
  ASSERT_ENGINE(raw, cfg);
  const StopGuard stop_guard(engine.get());
  const StopGuard raw_guard(raw.get());
  auto noop = [](const NetAddr&, PeerState) {};

  auto self = engine->watch_peer(engine->main_address(), noop);
  ASSERT_FALSE(self.ok());
  EXPECT_EQ(self.status().code(), Errc::invalid_argument);
  EXPECT_NE(self.status().message().find("itself"), std::string::npos) << self.status().to_string();

  auto zero = engine->watch_peer(raw->main_address(), noop, {0ms, 0ms});
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("interval"), std::string::npos) << zero.status().to_string();

  auto no_callback = engine->watch_peer(raw->main_address(), nullptr);
  ASSERT_FALSE(no_callback.ok());
  EXPECT_NE(no_callback.status().message().find("callback"), std::string::npos);

  auto reserved = engine->channel("fabric.liveness", [](const ChannelMessage&) {});
  ASSERT_FALSE(reserved.ok());
  EXPECT_NE(reserved.status().message().find("'fabric.'"), std::string::npos)
      << reserved.status().to_string();

  // An engine on raw receives cannot carry pings: refused, and its raw pool is untouched.
  ASSERT_OK(raw->submit_recvs(cfg.max_message_size, 4, [](std::span<const std::byte>) {}));
  auto on_raw = raw->watch_peer(engine->main_address(), noop);
  ASSERT_FALSE(on_raw.ok());
  EXPECT_EQ(on_raw.status().code(), Errc::invalid_argument);
  EXPECT_NE(on_raw.status().message().find("submit_recvs"), std::string::npos)
      << on_raw.status().to_string();

  raw->stop();
  engine->stop();
  auto stopped = engine->watch_peer(raw->main_address(), noop);
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), Errc::shutdown);
}

FABRIC_INSTANTIATE_PROVIDERS(PeerWatchTest);

}  // namespace
}  // namespace fabric::conformance
