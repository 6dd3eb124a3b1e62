// TransferEngine::metrics() where the provider's answers are chosen (FakeDomains): requests held
// by a peer that refuses every post are the queue depth and have no post latency; a peer whose
// requests expire unanswered, or whose post is refused with an error, is lost once; the first
// metrics_peer_labels peers are counted under their own label and the rest under `other`.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "doubles/domain_decorator.hpp"
#include "doubles/fake_domain.hpp"
#include "fabric/fabric.hpp"

namespace fabric {
namespace {

using namespace std::chrono_literals;

constexpr auto kWait = 20s;
constexpr std::size_t kSingle = 1;  // request_kind_name order
constexpr std::size_t kBytes = 1 << 16;

struct Node {
  std::unique_ptr<TransferEngine> engine;
  std::vector<std::byte> memory = std::vector<std::byte>(kBytes);
  Registered reg;

  std::vector<std::vector<std::byte>> domain_addresses() const {
    const NetAddr& a = engine->main_address();
    std::vector<std::vector<std::byte>> out;
    for (std::size_t i = 0; i < a.num_domains(); ++i) {
      out.emplace_back(a.domain_address(i).begin(), a.domain_address(i).end());
    }
    return out;
  }
};

class EngineMetricsOnFakeDomains : public ::testing::Test {
 protected:
  void SetUp() override {
    domain::set_test_decorator(fabric_->decorator([this] { return options_; }));
  }
  void TearDown() override {
    for (auto& n : nodes_) {
      if (n->engine) n->engine->stop();
    }
    domain::set_test_decorator({});
  }

  Node& add_node(std::uint32_t peer_labels = 16) {
    EngineConfig c;
    c.provider = "shm";  // opened, then replaced by the decorator
    c.request_timeout = request_timeout_;
    c.drain_timeout = 200ms;
    c.metrics_peer_labels = peer_labels;
    auto engine = TransferEngine::create(c);
    EXPECT_TRUE(engine.ok()) << engine.status().to_string();
    nodes_.push_back(std::make_unique<Node>());
    Node& node = *nodes_.back();
    if (!engine.ok()) return node;
    node.engine = std::move(engine).value();
    auto reg = node.engine->reg_mr(node.memory.data(), node.memory.size());
    EXPECT_TRUE(reg.ok()) << reg.status().to_string();
    if (reg.ok()) node.reg = std::move(reg).value();
    return node;
  }

  static std::shared_ptr<CompletionFlag> write(Node& from, const Node& to, std::uint64_t length,
                                               Status* accepted = nullptr) {
    auto done = std::make_shared<CompletionFlag>();
    const Status st = from.engine->submit_single_write({length, std::nullopt, {from.reg.handle, 0},
                                                        {to.reg.desc, 0}},
                                                       done);
    if (accepted != nullptr) *accepted = st;
    EXPECT_TRUE(st.ok()) << st.to_string();
    return done;
  }

  // The engine's metrics once `until` holds of them, or the last ones after kWait.
  template <typename Until>
  static EngineMetrics metrics_when(const TransferEngine& engine, Until until) {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    EngineMetrics m = engine.metrics();
    while (!until(m) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
      m = engine.metrics();
    }
    return m;
  }

  std::shared_ptr<domain::FakeFabric> fabric_ = domain::FakeFabric::create();
  domain::FakeOptions options_;
  std::chrono::milliseconds request_timeout_{30000};
  std::vector<std::unique_ptr<Node>> nodes_;
};

TEST_F(EngineMetricsOnFakeDomains, HeldRequestsAreTheQueueAndTheirSilentPeerIsLostOnce) {
  request_timeout_ = 1000ms;
  Node& refusing = add_node();
  Node& alive = add_node();
  ASSERT_TRUE(refusing.engine && alive.engine);
  options_.faults.refuse_to = refusing.domain_addresses();
  Node& a = add_node();
  ASSERT_TRUE(a.engine);

  constexpr int kServed = 5;
  for (int i = 0; i < kServed; ++i) ASSERT_TRUE(write(a, alive, 4096)->wait(kWait).ok());
  EngineMetrics m = a.engine->metrics();
  EXPECT_EQ(m.post_latency.count, std::uint64_t{kServed});
  EXPECT_EQ(m.post_latency.cumulative.back(), std::uint64_t{kServed});
  EXPECT_EQ(m.latency.count, std::uint64_t{kServed});
  EXPECT_EQ(m.queue_depth, 0u);
  EXPECT_EQ(m.peers_known, 1u);
  EXPECT_EQ(m.peers_lost, 0u);

  // Refused with `again` at every try: accepted, never posted. They are queued from their
  // acceptance on (before the worker takes them up); waiting for the peer to be known waits
  // until the worker has tried them.
  constexpr int kHeld = 3;
  std::vector<std::shared_ptr<CompletionFlag>> held;
  for (int i = 0; i < kHeld; ++i) held.push_back(write(a, refusing, 4096));
  m = metrics_when(*a.engine, [](const EngineMetrics& x) {
    return x.peers_known == 2 || x.requests[kSingle].failed != 0;
  });
  EXPECT_EQ(m.queue_depth, std::uint64_t{kHeld});
  EXPECT_EQ(m.in_flight, std::uint64_t{kHeld});
  EXPECT_EQ(m.post_latency.count, std::uint64_t{kServed});
  EXPECT_EQ(m.peers_known, 2u);

  // The refusing peer answers nothing for request_timeout: each request fails, the peer is lost
  // once, and nothing is queued any more.
  for (auto& flag : held) EXPECT_EQ(flag->wait(kWait).code(), Errc::timeout);
  m = a.engine->metrics();
  EXPECT_EQ(m.requests[kSingle].failed, std::uint64_t{kHeld});
  EXPECT_EQ(m.queue_depth, 0u);
  EXPECT_EQ(m.in_flight, 0u);
  EXPECT_EQ(m.post_latency.count, std::uint64_t{kServed});
  EXPECT_EQ(m.latency.count, std::uint64_t{kServed + kHeld});
  EXPECT_EQ(m.peers_lost, 1u);
  EXPECT_EQ(m.peers_known, 1u);
  // Never posted, so nothing of them stays with the provider once the queue lets them go.
  m = metrics_when(*a.engine, [](const EngineMetrics& x) { return x.held_after_report == 0; });
  EXPECT_EQ(m.held_after_report, 0u);
}

TEST_F(EngineMetricsOnFakeDomains, AnExpiredWriteTheProviderKeepsIsHeldAfterItsReport) {
  request_timeout_ = 200ms;
  Node& b = add_node();
  ASSERT_TRUE(b.engine);
  options_.faults.drop_write_nth = 1;  // a's first WRITE never completes; the others to b do
  Node& a = add_node();
  ASSERT_TRUE(a.engine);
  EXPECT_EQ(a.engine->metrics().held_after_report, 0u);

  auto held = write(a, b, 4096);
  // b completes a's other WRITEs meanwhile: only the bound on a request the provider holds
  // (6 x request_timeout) ends the first one.
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (!held->done() && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(write(a, b, 64)->wait(kWait).ok());
  }
  ASSERT_EQ(held->wait(kWait).code(), Errc::timeout);
  EngineMetrics m = a.engine->metrics();
  EXPECT_EQ(m.held_after_report, 1u) << "reported, yet its WRITE is still the provider's";
  EXPECT_EQ(m.in_flight, 0u);
  // A request that completes comes and goes without being held.
  ASSERT_TRUE(write(a, b, 64)->wait(kWait).ok());
  EXPECT_EQ(a.engine->metrics().held_after_report, 1u);
  // stop() fails what the provider never gave back: nothing is held after it.
  a.engine->stop();
  EXPECT_EQ(a.engine->metrics().held_after_report, 0u);
}

TEST_F(EngineMetricsOnFakeDomains, APeerWhosePostIsRefusedWithAnErrorIsLost) {
  Node& b = add_node();
  ASSERT_TRUE(b.engine);
  options_.faults.fail_write_nth = 2;  // Errc::provider, refused by post_write
  Node& a = add_node();
  ASSERT_TRUE(a.engine);
  ASSERT_TRUE(write(a, b, 64)->wait(kWait).ok());
  EXPECT_EQ(a.engine->metrics().peers_lost, 0u);
  EXPECT_EQ(write(a, b, 64)->wait(kWait).code(), Errc::provider);
  const EngineMetrics m = a.engine->metrics();
  EXPECT_EQ(m.peers_lost, 1u);
  EXPECT_EQ(m.peers_known, 0u);
  EXPECT_EQ(m.requests[kSingle].failed, 1u);
  EXPECT_EQ(m.post_latency.count, 1u);  // the refused one never reached the provider
}

TEST_F(EngineMetricsOnFakeDomains, PeersPastTheLabelledOnesCountAsOther) {
  constexpr std::uint32_t kLabelled = 2;
  Node& a = add_node(kLabelled);
  ASSERT_TRUE(a.engine);
  // Four peers, each written a size of its own, in order: the first two get labels.
  const std::uint64_t sizes[] = {100, 200, 300, 400};
  std::vector<Node*> peers;
  for (std::size_t i = 0; i < std::size(sizes); ++i) peers.push_back(&add_node());
  for (std::size_t i = 0; i < peers.size(); ++i) {
    ASSERT_TRUE(peers[i]->engine);
    ASSERT_TRUE(write(a, *peers[i], sizes[i])->wait(kWait).ok());
    ASSERT_TRUE(write(a, *peers[i], sizes[i])->wait(kWait).ok());
  }
  const EngineMetrics m = a.engine->metrics();
  ASSERT_EQ(m.peers.size(), kLabelled + 1);
  for (std::uint32_t i = 0; i < kLabelled; ++i) {
    EXPECT_FALSE(m.peers[i].other);
    EXPECT_EQ(m.peers[i].peer, peers[i]->engine->main_address().instance_id());
    EXPECT_EQ(m.peers[i].requests.ok, 2u);
    EXPECT_EQ(m.peers[i].requests.bytes_ok, 2 * sizes[i]);
  }
  EXPECT_TRUE(m.peers.back().other);
  EXPECT_EQ(m.peers.back().requests.ok, 4u);
  EXPECT_EQ(m.peers.back().requests.bytes_ok, 2 * (sizes[2] + sizes[3]));
  std::uint64_t bytes = 0, requests = 0;
  for (const PeerCounts& p : m.peers) {
    bytes += p.requests.bytes_ok;
    requests += p.requests.ok;
  }
  EXPECT_EQ(bytes, m.requests[kSingle].bytes_ok);
  EXPECT_EQ(bytes, 2 * std::accumulate(std::begin(sizes), std::end(sizes), std::uint64_t{0}));
  EXPECT_EQ(requests, m.requests[kSingle].ok);
  EXPECT_EQ(m.peers_known, 4u);
}

TEST_F(EngineMetricsOnFakeDomains, NoPeerLabelsMeansNoPeerCounts) {
  Node& a = add_node(0);
  Node& b = add_node();
  ASSERT_TRUE(a.engine && b.engine);
  ASSERT_TRUE(write(a, b, 64)->wait(kWait).ok());
  const EngineMetrics m = a.engine->metrics();
  EXPECT_TRUE(m.peers.empty());
  EXPECT_EQ(m.peers_known, 1u);
  EXPECT_EQ(m.requests[kSingle].ok, 1u);
}

TEST_F(EngineMetricsOnFakeDomains, TooManyPeerLabelsIsRefused) {
  EngineConfig c;
  c.provider = "shm";
  c.metrics_peer_labels = kMaxPeerLabels + 1;
  const auto engine = TransferEngine::create(c);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), Errc::invalid_argument);
}

}  // namespace
}  // namespace fabric
