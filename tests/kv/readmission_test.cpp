// A starved peer is not a dead one (docs/kv.md, "Silence and re-admission"): a prefill process
// SIGSTOPped past the silence bound is declared dead and fenced, the request waiting on it fails
// as documented; after SIGCONT the decoder connects again, the prefill rank is re-admitted with
// fresh keys, and its next request completes byte-exact, neither process restarted.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "fabric/engine.hpp"
#include "fabric/kv/layout.hpp"
#include "fabric/kv/receiver.hpp"
#include "fabric/kv/sender.hpp"
#include "fabric_test/child_process.hpp"
#include "fabric_test/victim.hpp"

namespace fabric::kv {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kLayers = 2;
constexpr std::uint32_t kPages = 16;
constexpr std::uint32_t kTokensPerPage = 16;
constexpr std::uint32_t kTokens = 64;
constexpr auto kHeartbeat = 200ms;
constexpr auto kRequestTimeout = 1000ms;

KvLayout layout() {
  return vllm_nhd(CacheShape{kLayers, kPages, kTokensPerPage, 2, shard_heads(2, 1, 0).value(), 8, 2});
}

EngineConfig config(const std::string& provider) {
  EngineConfig c;
  c.provider = provider;
  c.request_timeout = kRequestTimeout;
  return c;
}

std::vector<std::uint32_t> pages() {
  std::vector<std::uint32_t> p((kTokens + kTokensPerPage - 1) / kTokensPerPage);
  std::iota(p.begin(), p.end(), 0u);
  return p;
}

// The prefill process: a Sender over memory filled with a byte per request; "job <id> <byte>"
// fills and prepares and writes every layer, then answers "prepared"; "bye" ends it.
int prefill_body(fabric::test::Channel& ch, const std::string& provider) {
  auto engine = TransferEngine::create(fabric::test::victim_config(config(provider)));
  CHILD_REQUIRE_OK(engine.status());
  const KvLayout l = layout();
  std::vector<std::byte> memory(l.span_bytes() * 2 + 4096);
  auto reg = (*engine)->reg_mr(memory.data(), memory.size());
  CHILD_REQUIRE_OK(reg.status());
  SenderConfig cfg;
  cfg.layout = l;
  cfg.regions.assign(l.num_regions, reg->handle);
  cfg.liveness.heartbeat_interval = kHeartbeat;
  cfg.receiver_timeout = 60s;
  auto sender = Sender::create(**engine, cfg);
  CHILD_REQUIRE_OK(sender.status());
  CHILD_REQUIRE(ch.send_addr((*engine)->main_address()), ch.last_error());
  for (;;) {
    auto cmd = ch.recv_string(120s);
    CHILD_REQUIRE(cmd.has_value(), ch.last_error());
    if (*cmd == "bye") return fabric::test::kChildOk;
    const auto space = cmd->rfind(' ');
    const std::string id = cmd->substr(4, space - 4);
    std::memset(memory.data(), std::stoi(cmd->substr(space + 1)), memory.size());
    CHILD_REQUIRE_OK((*sender)->prepare(id, pages(), kTokens));
    for (std::uint32_t layer = 0; layer < kLayers; ++layer) {
      CHILD_REQUIRE_OK((*sender)->layer_done(id, layer));
    }
    CHILD_REQUIRE(ch.send_string("prepared"), ch.last_error());
  }
}

class Readmission : public ::testing::TestWithParam<std::string> {};

TEST_P(Readmission, AStoppedPrefillerIsFencedThenReadmittedAndServesTheNextRequest) {
  const std::string provider = GetParam();
  // Spawned before this process starts engine threads (src/proc/child_process.hpp).
  auto child = fabric::test::spawn_child(
      [provider](fabric::test::Channel& ch) { return prefill_body(ch, provider); }, 300s);
  auto prefill_addr = child.channel().recv_addr(60s);
  ASSERT_TRUE(prefill_addr.has_value()) << child.channel().last_error();

  auto engine = TransferEngine::create(config(provider));
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const KvLayout l = layout();
  std::vector<std::byte> memory(l.span_bytes() * 2 + 4096);
  ReceiverConfig cfg;
  cfg.layout = l;
  cfg.regions.assign(l.num_regions, RegionMemory{memory.data(), memory.size()});
  cfg.liveness.heartbeat_interval = kHeartbeat;
  cfg.quarantine = 500ms;  // shm cannot fence: its pages are held this long instead
  auto receiver = Receiver::create(**engine, cfg);
  ASSERT_TRUE(receiver.ok()) << receiver.status().to_string();
  auto source = (*receiver)->connect(*prefill_addr, 30s);
  ASSERT_TRUE(source.ok()) << source.status().to_string();
  const std::uint32_t sources[] = {*source};

  // The request's pages hold `fill` and nothing else but bytes no request writes (zero): the
  // prefiller's whole memory is `fill`, and both requests cover the same pages.
  auto landed_all = [&](int fill) {
    std::size_t filled = 0;
    for (std::byte b : memory) {
      if (b == std::byte(fill)) {
        ++filled;
      } else if (b != std::byte{0}) {
        return false;
      }
    }
    return filled > 0;
  };
  auto run_job = [&](const std::string& id, int fill) -> Status {
    auto expected = (*receiver)->request(id, pages(), kTokens, sources);
    if (!expected) return expected.status();
    if (!child.channel().send_string("job " + id + " " + std::to_string(fill))) {
      return Status(Errc::provider, child.channel().last_error());
    }
    auto done = (*receiver)->wait(id, 60s);
    if (!done) return done.status();
    if (done->state != State::done) return done->error;
    if (!child.channel().expect("prepared", 60s)) {
      return Status(Errc::provider, child.channel().last_error());
    }
    return (*receiver)->release(id);
  };
  ASSERT_TRUE(run_job("before", 0x11).ok());
  EXPECT_TRUE(landed_all(0x11));

  // Asked for, then the prefiller stops: silent past 2 heartbeats + request_timeout.
  ASSERT_TRUE((*receiver)->request("stalled", pages(), kTokens, sources).ok());
  ASSERT_EQ(::kill(child.pid(), SIGSTOP), 0);
  auto stalled = (*receiver)->wait("stalled", 60s);
  ASSERT_EQ(::kill(child.pid(), SIGCONT), 0);  // before any check: never leave it stopped
  ASSERT_TRUE(stalled.ok()) << stalled.status().to_string();
  EXPECT_EQ(stalled->state, State::failed);
  EXPECT_EQ(stalled->error.code(), Errc::timeout) << stalled->error.to_string();
  EXPECT_NE(stalled->error.message().find("silent"), std::string::npos)
      << stalled->error.to_string();
  ASSERT_TRUE((*receiver)->release("stalled").ok());
  // Dead and fenced: asking it again is refused until it is re-admitted.
  EXPECT_FALSE((*receiver)->request("refused", pages(), kTokens, sources).ok());

  // Running again: connect re-admits it under the same index, and the next request lands.
  auto again = (*receiver)->connect(*prefill_addr, 30s);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(*again, *source);
  const Status after = run_job("after", 0x22);
  EXPECT_TRUE(after.ok()) << after.to_string();
  EXPECT_TRUE(landed_all(0x22));

  ASSERT_TRUE(child.channel().send_string("bye"));
  EXPECT_TRUE(child.wait_exit(60s).ok());
}

INSTANTIATE_TEST_SUITE_P(Providers, Readmission, ::testing::Values("shm", "tcp"));

}  // namespace
}  // namespace fabric::kv
