// TransferEngine::metrics() after known traffic between two engines of this process on tcp:
// requests and bytes (by kind and by peer), latency and post latency samples, immediates and
// messages received, registrations, in flight and queued, peers known, lost and fenced.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "fabric/engine.hpp"

namespace fabric {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kSingle = 1;  // request_kind_name order
constexpr std::size_t kSend = 0;

EngineConfig tcp(bool metrics, std::chrono::milliseconds request_timeout) {
  EngineConfig c;
  c.provider = "tcp";
  c.metrics = metrics;
  c.request_timeout = request_timeout;
  return c;
}

struct Pair {
  std::unique_ptr<TransferEngine> tx, rx;
  std::vector<std::byte> src = std::vector<std::byte>(1 << 20);
  std::vector<std::byte> dst = std::vector<std::byte>(1 << 20);
  Registered src_reg, dst_reg;
};

// A short request_timeout only where a request is meant to fail: a loaded machine may stall a
// healthy 1 MiB write for longer.
Pair make_engines(bool metrics, std::chrono::milliseconds request_timeout = 30s) {
  Pair p;
  p.tx = TransferEngine::create(tcp(metrics, request_timeout)).value();
  p.rx = TransferEngine::create(tcp(metrics, request_timeout)).value();
  p.src_reg = p.tx->reg_mr(p.src.data(), p.src.size()).value();
  p.dst_reg = p.rx->reg_mr(p.dst.data(), p.dst.size()).value();
  return p;
}

Status write(Pair& p, std::uint64_t length, std::uint32_t imm) {
  SingleWrite w;
  w.length = length;
  w.imm = imm;
  w.src = {p.src_reg.handle, 0};
  w.dst = {p.dst_reg.desc, 0};
  auto done = std::make_shared<CompletionFlag>();
  if (auto st = p.tx->submit_single_write(w, done); !st.ok()) return st;
  return done->wait(30s);
}

TEST(EngineMetrics, CountsWhatWasSentAndReceived) {
  // Declared before the engines so it outlives their callback thread.
  std::atomic<int> got{0};
  Pair p = make_engines(true);
  const std::uint64_t sizes[] = {1, 4096, 65536, 1 << 20};
  std::uint64_t bytes = 0;
  for (std::uint64_t n : sizes) {
    ASSERT_TRUE(write(p, n, 77).ok());
    bytes += n;
  }
  ASSERT_TRUE(p.rx->submit_recvs(p.rx->config().max_message_size, 4,
                                 [&got](std::span<const std::byte>) { ++got; })
                  .ok());
  const std::vector<std::byte> message(100);
  auto sent = std::make_shared<CompletionFlag>();
  ASSERT_TRUE(p.tx->submit_send(p.rx->main_address(), message, sent).ok());
  ASSERT_TRUE(sent->wait(30s).ok());

  const EngineMetrics tx = p.tx->metrics();
  EXPECT_EQ(tx.requests[kSingle].ok, 4u);
  EXPECT_EQ(tx.requests[kSingle].failed, 0u);
  EXPECT_EQ(tx.requests[kSingle].bytes_ok, bytes);
  EXPECT_EQ(tx.requests[kSend].ok, 1u);
  EXPECT_EQ(tx.requests[kSend].bytes_ok, 100u);
  EXPECT_EQ(tx.latency.count, 5u);
  EXPECT_EQ(tx.latency.cumulative.back(), 5u);
  EXPECT_GT(tx.latency.sum_seconds, 0.0);
  EXPECT_EQ(tx.post_latency.count, 5u);
  EXPECT_EQ(tx.post_latency.cumulative.back(), 5u);
  EXPECT_GT(tx.post_latency.sum_seconds, 0.0);
  // Posted before completed: no request's post latency can exceed its whole latency.
  EXPECT_LE(tx.post_latency.sum_seconds, tx.latency.sum_seconds);
  EXPECT_EQ(tx.in_flight, 0u);
  EXPECT_EQ(tx.queue_depth, 0u);
  EXPECT_EQ(tx.peers_known, 1u);
  EXPECT_EQ(tx.peers_lost, 0u);
  // One peer, labelled (metrics_peer_labels is 16), and an empty `other`.
  ASSERT_EQ(tx.peers.size(), 2u);
  EXPECT_EQ(tx.peers[0].peer, p.rx->main_address().instance_id());
  EXPECT_EQ(tx.peers[0].requests.ok, 5u);
  EXPECT_EQ(tx.peers[0].requests.bytes_ok, bytes + 100);
  EXPECT_TRUE(tx.peers[1].other);
  EXPECT_EQ(tx.peers[1].requests.ok, 0u);
  EXPECT_EQ(tx.registrations, 1u);
  EXPECT_EQ(tx.registered_bytes, p.src.size());

  // The receiver counts one immediate per WRITE (one Domain: one WRITE each) and the message
  // once its callback has it; both arrive on its own threads, so wait for them, bounded.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  EngineMetrics rx = p.rx->metrics();
  while ((rx.imms_received < 4 || rx.messages_received < 1 || got.load() < 1) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
    rx = p.rx->metrics();
  }
  EXPECT_EQ(rx.imms_received, 4u);
  EXPECT_EQ(rx.messages_received, 1u);
  EXPECT_EQ(got.load(), 1);
  EXPECT_EQ(rx.requests[kSingle].ok, 0u);

  ASSERT_TRUE(p.tx->dereg_mr(p.src_reg.handle).ok());
  EXPECT_EQ(p.tx->metrics().registrations, 0u);
  EXPECT_EQ(p.tx->metrics().registered_bytes, 0u);
}

TEST(EngineMetrics, AFailedRequestIsCountedAsFailed) {
  Pair p = make_engines(true, 1000ms);
  p.rx->stop();  // its endpoint is gone: the write fails (refused, or after request_timeout)
  const Status st = write(p, 4096, 1);
  ASSERT_FALSE(st.ok());
  const EngineMetrics m = p.tx->metrics();
  EXPECT_EQ(m.requests[kSingle].failed, 1u);
  EXPECT_EQ(m.requests[kSingle].ok, 0u);
  EXPECT_EQ(m.requests[kSingle].bytes_ok, 0u);
  EXPECT_EQ(m.queue_depth, 0u);
  // Its requests expire while it answers nothing, or are refused with an error: lost either way.
  EXPECT_EQ(m.peers_lost, 1u) << st.to_string();
  EXPECT_EQ(m.peers_known, 0u);
}

TEST(EngineMetrics, AFencedPeerIsLostAndKnownAgainOnceResolved) {
  Pair p = make_engines(true);
  ASSERT_TRUE(write(p, 64, 1).ok());
  EngineMetrics m = p.tx->metrics();
  EXPECT_EQ(m.peers_known, 1u);
  EXPECT_EQ(m.peers_lost, 0u);
  ASSERT_TRUE(p.tx->fence_peer(p.rx->main_address()).ok());
  m = p.tx->metrics();
  EXPECT_EQ(m.peers_known, 0u);
  EXPECT_EQ(m.peers_lost, 1u);
  EXPECT_EQ(m.peers_fenced, 1u);
  // tcp reconnects on a later contact: the peer is resolved, and known, again.
  ASSERT_TRUE(write(p, 64, 1).ok());
  m = p.tx->metrics();
  EXPECT_EQ(m.peers_known, 1u);
  EXPECT_EQ(m.peers_lost, 1u);
  ASSERT_EQ(m.peers.size(), 2u);  // the same label as before the fence
  EXPECT_EQ(m.peers[0].requests.ok, 2u);
}

TEST(EngineMetrics, OffCountsNoRequests) {
  Pair p = make_engines(false);
  ASSERT_TRUE(write(p, 4096, 1).ok());
  const EngineMetrics m = p.tx->metrics();
  EXPECT_EQ(m.requests[kSingle].ok, 0u);
  EXPECT_EQ(m.latency.count, 0u);
  EXPECT_EQ(m.post_latency.count, 0u);
  EXPECT_EQ(m.peers.at(0).requests.ok, 0u);
  EXPECT_EQ(m.registrations, 1u);  // gauges are kept either way
  EXPECT_EQ(m.peers_known, 1u);
}

TEST(EngineMetrics, LatencyBoundsDoubleFromOneMicrosecondToInfinity) {
  EXPECT_DOUBLE_EQ(latency_bucket_bound_seconds(0), 1e-6);
  EXPECT_DOUBLE_EQ(latency_bucket_bound_seconds(10), 1024e-6);
  EXPECT_TRUE(std::isinf(latency_bucket_bound_seconds(kLatencyBuckets - 1)));
  EXPECT_EQ(request_kind_name(1), "single_write");
  EXPECT_EQ(request_kind_name(kRequestKinds), "?");
}

}  // namespace
}  // namespace fabric
