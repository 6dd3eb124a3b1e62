// The engine through its public API, with every Domain replaced by a FakeDomain (no provider):
// transfers land byte-exact and are counted, messages arrive whole, a refused slice does not
// stop a scatter, a peer whose completions never come times out without stalling the others,
// and back-pressure from small send queues loses nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "doubles/domain_decorator.hpp"
#include "doubles/fake_domain.hpp"
#include "fabric/fabric.hpp"

namespace fabric {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kWait = 20s;
constexpr std::uint32_t kImm = 0x1234;
constexpr std::size_t kBytes = 1 << 16;

std::byte pattern(std::size_t i, std::uint32_t salt) {
  return static_cast<std::byte>((i * 131 + salt * 17 + 7) & 0xFF);
}

// One engine and one registered buffer of kBytes.
struct Node {
  std::unique_ptr<TransferEngine> engine;
  std::vector<std::byte> memory = std::vector<std::byte>(kBytes);
  Registered reg;

  std::vector<std::vector<std::byte>> domain_addresses() const {
    std::vector<std::vector<std::byte>> out;
    const NetAddr& a = engine->main_address();
    for (std::size_t i = 0; i < a.num_domains(); ++i) {
      out.emplace_back(a.domain_address(i).begin(), a.domain_address(i).end());
    }
    return out;
  }
};

class EngineOnFakeDomains : public ::testing::Test {
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

  // Creates an engine whose Domains are FakeDomains opened with the current options_.
  Node& add_node(std::uint32_t domains = 1, std::uint32_t groups = 1) {
    EngineConfig c;
    c.provider = "shm";  // opened, then replaced by the decorator
    c.domains_per_group = domains;
    if (groups > 1) c.groups.resize(groups);
    c.request_timeout = config_request_timeout_;
    c.drain_timeout = 200ms;
    c.max_outstanding_requests = max_outstanding_;
    c.post_on_submit = post_on_submit_;
    // Straight to sleep when idle: the worker is out of its loop's passes most of the time.
    if (post_on_submit_) c.idle_yield = 0us;
    auto engine = TransferEngine::create(c);
    EXPECT_TRUE(engine.ok()) << engine.status().to_string();
    auto node = std::make_unique<Node>();
    if (!engine.ok()) {
      nodes_.push_back(std::move(node));
      return *nodes_.back();
    }
    node->engine = std::move(engine).value();
    auto reg = node->engine->reg_mr(node->memory.data(), node->memory.size());
    EXPECT_TRUE(reg.ok()) << reg.status().to_string();
    if (reg.ok()) node->reg = std::move(reg).value();
    nodes_.push_back(std::move(node));
    return *nodes_.back();
  }

  static void fill(Node& n, std::uint32_t salt) {
    for (std::size_t i = 0; i < n.memory.size(); ++i) n.memory[i] = pattern(i, salt);
  }
  // Whether dst[dst_off, +len) holds src's pattern from src_off.
  static bool landed(const Node& dst, std::size_t dst_off, std::size_t src_off, std::size_t len,
                     std::uint32_t salt) {
    for (std::size_t i = 0; i < len; ++i) {
      if (dst.memory[dst_off + i] != pattern(src_off + i, salt)) return false;
    }
    return true;
  }

  std::shared_ptr<domain::FakeFabric> fabric_ = domain::FakeFabric::create();
  domain::FakeOptions options_;
  std::chrono::milliseconds config_request_timeout_{5000};
  std::uint32_t max_outstanding_ = 16384;
  bool post_on_submit_ = false;
  std::vector<std::unique_ptr<Node>> nodes_;
};

TEST_F(EngineOnFakeDomains, SingleWritePagedWriteAndScatterLandByteExactAndAreCounted) {
  Node& a = add_node(2);
  Node& b = add_node(2);
  Node& c = add_node(2);
  ASSERT_TRUE(a.engine && b.engine && c.engine);
  ASSERT_EQ(a.engine->main_address().provider(), "shm");
  fill(a, 1);
  auto counter_b = b.engine->imm_counter(kImm);
  auto counter_c = c.engine->imm_counter(kImm);
  ASSERT_TRUE(counter_b.ok() && counter_c.ok());

  // Single write, sharded over both Domains: 2 pieces, 2 immediates.
  auto single = std::make_shared<CompletionFlag>();
  ASSERT_TRUE(a.engine
                  ->submit_single_write({10'001, kImm, {a.reg.handle, 3}, {b.reg.desc, 5}},
                                        single)
                  .ok());
  ASSERT_TRUE(single->wait(kWait).ok()) << single->status().to_string();
  EXPECT_TRUE(landed(b, 5, 3, 10'001, 1));
  EXPECT_EQ(b.memory[4], std::byte{0});
  EXPECT_EQ(b.memory[5 + 10'001], std::byte{0});

  // Paged write: 5 pages of 256 bytes, shuffled, into [32768, ...): 5 immediates.
  constexpr std::uint64_t kPage = 256;
  PagedWrite paged;
  paged.page_length = kPage;
  paged.imm = kImm;
  paged.src = a.reg.handle;
  paged.src_pages = {{4, 0, 9, 2, 7}, kPage, 0};
  paged.dst = b.reg.desc;
  paged.dst_pages = {{0, 1, 2, 3, 4}, kPage, 32768};
  auto paged_done = std::make_shared<CompletionFlag>();
  ASSERT_TRUE(a.engine->submit_paged_writes(paged, paged_done).ok());
  ASSERT_TRUE(paged_done->wait(kWait).ok()) << paged_done->status().to_string();
  for (std::size_t p = 0; p < 5; ++p) {
    EXPECT_TRUE(landed(b, 32768 + p * kPage, paged.src_pages.indices[p] * kPage, kPage, 1))
        << "page " << p;
  }

  // Scatter: one slice each to b and c, one immediate each.
  Scatter scatter;
  scatter.src = a.reg.handle;
  scatter.imm = kImm;
  scatter.slices = {{b.reg.desc, 1000, 40000, 50000}, {c.reg.desc, 3000, 41000, 100}};
  auto scattered = std::make_shared<CompletionFlag>();
  ASSERT_TRUE(a.engine->submit_scatter(scatter, scattered).ok());
  ASSERT_TRUE(scattered->wait(kWait).ok()) << scattered->status().to_string();
  EXPECT_TRUE(landed(b, 50000, 40000, 1000, 1));
  EXPECT_TRUE(landed(c, 100, 41000, 3000, 1));

  EXPECT_TRUE((*counter_b)->wait(2 + 5 + 1, kWait).ok());
  EXPECT_TRUE((*counter_c)->wait(1, kWait).ok());
  EXPECT_EQ((*counter_b)->value(), 8u);
  EXPECT_EQ((*counter_c)->value(), 1u);
  // The writes really went through the fakes.
  auto stats = fabric_->stats(a.engine->main_address().domain_address(0));
  ASSERT_NE(stats, nullptr);
  EXPECT_GT(stats->writes.load(), 0u);
}

// docs/api.md, submit_scatter: a refused slice does not stop the others; on_done gets the first
// error once all are done. The slice fails when posted, or is accepted and fails at completion.
TEST_F(EngineOnFakeDomains, ARefusedScatterSliceDoesNotStopTheOthers) {
  for (const bool at_completion : {false, true}) {
    SCOPED_TRACE(at_completion ? "failed at completion" : "refused by post_write");
    options_ = {};
    std::vector<Node*> peers;
    for (int i = 0; i < 4; ++i) peers.push_back(&add_node());
    options_.faults.fail_write_nth = 2;  // the writer's 2nd WRITE fails in "the provider"
    options_.faults.fail_write_code = Errc::provider;
    options_.faults.fail_write_at_completion = at_completion;
    Node& a = add_node();
    ASSERT_TRUE(a.engine);
    fill(a, 2);
    Scatter scatter;
    scatter.src = a.reg.handle;
    scatter.imm = kImm;
    std::vector<std::shared_ptr<ImmCounter>> counters;
    for (std::size_t i = 0; i < peers.size(); ++i) {
      ASSERT_TRUE(peers[i]->engine);
      scatter.slices.push_back({peers[i]->reg.desc, 4096, i * 4096, 0});
      auto counter = peers[i]->engine->imm_counter(kImm);
      ASSERT_TRUE(counter.ok());
      counters.push_back(*counter);
    }
    auto done = std::make_shared<CompletionFlag>();
    ASSERT_TRUE(a.engine->submit_scatter(scatter, done).ok());
    const Status st = done->wait(kWait);
    EXPECT_EQ(st.code(), Errc::provider) << st.to_string();
    std::size_t landed_count = 0;
    for (std::size_t i = 0; i < peers.size(); ++i) {
      if (!landed(*peers[i], 0, i * 4096, 4096, 2)) {
        EXPECT_EQ(counters[i]->value(), 0u) << "peer " << i;  // nothing landed, nothing counted
        continue;
      }
      ++landed_count;
      // The target's worker counts the immediate when it polls, after the writer's completion.
      EXPECT_TRUE(counters[i]->wait(1, kWait).ok()) << "peer " << i;
      EXPECT_EQ(counters[i]->value(), 1u) << "peer " << i;
    }
    EXPECT_EQ(landed_count, peers.size() - 1);  // every slice but the refused one
    EXPECT_EQ(fabric_->stats(a.engine->main_address().domain_address(0))->injected.load(), 1u);
  }
}

// A slice the target refuses (its region was deregistered: a remote access error) fails the
// scatter once the others are done; the other peers' bytes land.
TEST_F(EngineOnFakeDomains, AScatterSliceToARevokedRegionFailsTheScatterAfterTheOthersLand) {
  Node& b = add_node();
  Node& c = add_node();
  Node& d = add_node();
  Node& a = add_node();
  ASSERT_TRUE(a.engine && b.engine && c.engine && d.engine);
  fill(a, 3);
  ASSERT_TRUE(c.engine->dereg_mr(c.reg.handle).ok());
  Scatter scatter;
  scatter.src = a.reg.handle;
  scatter.imm = kImm;
  scatter.slices = {{b.reg.desc, 512, 0, 0}, {c.reg.desc, 512, 512, 0}, {d.reg.desc, 512, 1024, 0}};
  auto done = std::make_shared<CompletionFlag>();
  ASSERT_TRUE(a.engine->submit_scatter(scatter, done).ok());
  const Status st = done->wait(kWait);
  EXPECT_EQ(st.code(), Errc::provider) << st.to_string();
  EXPECT_TRUE(landed(b, 0, 0, 512, 3));
  EXPECT_TRUE(landed(d, 0, 1024, 512, 3));
  EXPECT_EQ(c.memory[0], std::byte{0});
}

TEST_F(EngineOnFakeDomains, CompletionsThatNeverComeTimeOutAndOtherPeersAreStillServed) {
  config_request_timeout_ = 300ms;
  Node& dead = add_node();
  Node& alive = add_node();
  ASSERT_TRUE(dead.engine && alive.engine);
  options_.faults.drop_to = dead.domain_addresses();
  Node& a = add_node();
  ASSERT_TRUE(a.engine);
  fill(a, 4);

  auto lost = std::make_shared<CompletionFlag>();
  const auto before = Clock::now();
  ASSERT_TRUE(a.engine->submit_single_write({4096, kImm, {a.reg.handle, 0}, {dead.reg.desc, 0}},
                                            lost)
                  .ok());
  const Status st = lost->wait(config_request_timeout_ + 10s);
  const auto took = Clock::now() - before;
  EXPECT_EQ(st.code(), Errc::timeout) << st.to_string();
  EXPECT_GE(took, config_request_timeout_);
  EXPECT_LT(took, config_request_timeout_ + 5s);  // the timeout plus a loaded host's slack
  EXPECT_EQ(dead.memory[0], std::byte{0});

  auto served = std::make_shared<CompletionFlag>();
  ASSERT_TRUE(a.engine->submit_single_write({4096, kImm, {a.reg.handle, 0}, {alive.reg.desc, 0}},
                                            served)
                  .ok());
  ASSERT_TRUE(served->wait(kWait).ok()) << served->status().to_string();
  EXPECT_TRUE(landed(alive, 0, 0, 4096, 4));
  EXPECT_EQ(fabric_->stats(a.engine->main_address().domain_address(0))->dropped.load(), 1u);
}

TEST_F(EngineOnFakeDomains, AWriteTheProviderHoldsFailsWhileItsPeerCompletesOthers) {
  config_request_timeout_ = 200ms;
  Node& b = add_node();
  ASSERT_TRUE(b.engine);
  options_.faults.drop_write_nth = 1;  // a's first WRITE vanishes; the others to b complete
  Node& a = add_node();
  ASSERT_TRUE(a.engine);
  fill(a, 6);

  auto held = std::make_shared<CompletionFlag>();
  const auto t0 = Clock::now();
  ASSERT_TRUE(
      a.engine->submit_single_write({4096, kImm, {a.reg.handle, 0}, {b.reg.desc, 0}}, held).ok());
  // b keeps completing a's other WRITEs, so it is never a silent peer: only the bound on a
  // request the provider holds can end the first one.
  std::uint64_t others = 0;
  while (!held->done() && Clock::now() < t0 + kWait) {
    auto other = std::make_shared<CompletionFlag>();
    ASSERT_TRUE(a.engine->submit_single_write({4096, kImm, {a.reg.handle, 0}, {b.reg.desc, 8192}},
                                              other)
                    .ok());
    ASSERT_TRUE(other->wait(kWait).ok()) << other->status().to_string();
    ++others;
  }
  ASSERT_TRUE(held->done()) << "a WRITE the provider holds never failed";
  const Status st = held->wait(0ms);
  EXPECT_EQ(st.code(), Errc::timeout) << st.to_string();
  EXPECT_NE(st.message().find("provider holds"), std::string::npos) << st.to_string();
  // Not expired as a silent peer's request at 200 ms: held past the longer bound.
  EXPECT_GE(Clock::now() - t0, 6 * config_request_timeout_);
  EXPECT_GT(others, 0u);
  EXPECT_TRUE(landed(b, 8192, 0, 4096, 6));
}

TEST_F(EngineOnFakeDomains, APeerThatRefusesEveryPostDoesNotHoldUpRequestsToOthers) {
  // Long enough that requests to the live peer waiting behind the refused one would miss kWait.
  config_request_timeout_ = 120s;
  Node& refusing = add_node();
  Node& alive = add_node();
  ASSERT_TRUE(refusing.engine && alive.engine);
  options_.faults.refuse_to = refusing.domain_addresses();
  Node& a = add_node();
  ASSERT_TRUE(a.engine);
  fill(a, 5);

  // Two requests to the refusing peer first (each refused, in order), then WRITEs and a message
  // to the live one.
  std::vector<std::shared_ptr<CompletionFlag>> held;
  for (std::uint64_t off : {0u, 4096u}) {
    held.push_back(std::make_shared<CompletionFlag>());
    ASSERT_TRUE(a.engine
                    ->submit_single_write({4096, kImm, {a.reg.handle, off}, {refusing.reg.desc, off}},
                                          held.back())
                    .ok());
  }
  std::vector<std::byte> got;
  std::mutex m;
  std::condition_variable cv;
  ASSERT_TRUE(alive.engine
                  ->submit_recvs(alive.engine->config().max_message_size, 1,
                                 [&](std::span<const std::byte> msg) {
                                   std::lock_guard lock(m);
                                   got.assign(msg.begin(), msg.end());
                                   cv.notify_all();
                                 })
                  .ok());
  // Eight pages: a newcomer posts its first WRITE at once, the rest queue behind the refused
  // requests.
  constexpr std::uint64_t kPage = 256;
  PagedWrite paged;
  paged.page_length = kPage;
  paged.imm = kImm;
  paged.src = a.reg.handle;
  paged.src_pages = {{0, 1, 2, 3, 4, 5, 6, 7}, kPage, 0};
  paged.dst = alive.reg.desc;
  paged.dst_pages = {{0, 1, 2, 3, 4, 5, 6, 7}, kPage, 0};
  auto served = std::make_shared<CompletionFlag>();
  ASSERT_TRUE(a.engine->submit_paged_writes(paged, served).ok());
  const std::vector<std::byte> message(64, std::byte{0x5A});
  auto sent = std::make_shared<CompletionFlag>();
  ASSERT_TRUE(a.engine->submit_send(alive.engine->main_address(), message, sent).ok());

  ASSERT_TRUE(served->wait(kWait).ok()) << served->status().to_string();
  EXPECT_TRUE(landed(alive, 0, 0, 8 * kPage, 5));
  ASSERT_TRUE(sent->wait(kWait).ok()) << sent->status().to_string();
  {
    std::unique_lock lock(m);
    ASSERT_TRUE(cv.wait_for(lock, kWait, [&] { return !got.empty(); }));
    EXPECT_EQ(got, message);
  }
  // The refused requests are still waiting (nothing of them landed); they fail at stop.
  for (const auto& h : held) EXPECT_FALSE(h->done());
  EXPECT_EQ(refusing.memory[0], std::byte{0});
  EXPECT_GT(fabric_->stats(a.engine->main_address().domain_address(0))->refused_peer.load(), 0u);
}

TEST_F(EngineOnFakeDomains, MessagesArriveWholeInPostedReceives) {
  Node& b = add_node();
  Node& a = add_node();
  ASSERT_TRUE(a.engine && b.engine);
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::vector<std::byte>> received;
  ASSERT_TRUE(b.engine
                  ->submit_recvs(b.engine->config().max_message_size, 2,
                                 [&](std::span<const std::byte> data) {
                                   std::lock_guard lock(mutex);
                                   received.emplace_back(data.begin(), data.end());
                                   cv.notify_all();
                                 })
                  .ok());
  constexpr std::size_t kMessages = 5;  // more than the receives posted: they are re-posted
  std::vector<std::vector<std::byte>> sent;
  for (std::size_t m = 0; m < kMessages; ++m) {
    std::vector<std::byte> message(100 + m * 1000);
    for (std::size_t i = 0; i < message.size(); ++i) message[i] = pattern(i, 10 + m);
    auto done = std::make_shared<CompletionFlag>();
    ASSERT_TRUE(a.engine->submit_send(b.engine->main_address(), message, done).ok());
    ASSERT_TRUE(done->wait(kWait).ok()) << done->status().to_string();
    sent.push_back(std::move(message));
  }
  std::unique_lock lock(mutex);
  ASSERT_TRUE(cv.wait_for(lock, kWait, [&] { return received.size() == kMessages; }));
  // Each message arrives once and whole (in whatever order the callbacks ran).
  std::sort(received.begin(), received.end());
  std::sort(sent.begin(), sent.end());
  EXPECT_EQ(received, sent);
}

TEST_F(EngineOnFakeDomains, BackPressureFromSmallSendQueuesNeverLosesARequest) {
  Node& b = add_node(2);
  ASSERT_TRUE(b.engine);
  auto counter = b.engine->imm_counter(kImm);
  ASSERT_TRUE(counter.ok());
  options_.tx_depth = 4;
  options_.faults.again_every = 3;  // and the "provider" refuses below its depth too
  options_.faults.delay_polls = 2;
  max_outstanding_ = 32;            // submit_* pushes back as well
  Node& a = add_node(2);
  ASSERT_TRUE(a.engine);
  fill(a, 5);

  constexpr std::size_t kSlot = 64;
  constexpr std::size_t kRequests = kBytes / kSlot;  // 1024, each to its own slot
  auto done = std::make_shared<CompletionCounter>();
  std::size_t pushed_back = 0;
  const auto deadline = Clock::now() + kWait;
  for (std::size_t i = 0; i < kRequests; ++i) {
    const SingleWrite w{kSlot, kImm, {a.reg.handle, i * kSlot}, {b.reg.desc, i * kSlot},
                        WriteRouting::pinned(static_cast<std::uint32_t>(i % 2))};
    for (;;) {
      const Status st = a.engine->submit_single_write(w, done);
      if (st.ok()) break;
      ASSERT_EQ(st.code(), Errc::again) << st.to_string();
      ++pushed_back;
      ASSERT_LT(Clock::now(), deadline) << "submission " << i << " never accepted";
      std::this_thread::yield();
    }
  }
  ASSERT_TRUE(done->wait(kRequests, kWait).ok()) << done->first_error().to_string();
  EXPECT_EQ(done->succeeded(), kRequests);
  ASSERT_TRUE((*counter)->wait(kRequests, kWait).ok());
  EXPECT_EQ((*counter)->value(), kRequests);
  EXPECT_TRUE(landed(b, 0, 0, kBytes, 5));
  std::uint64_t refused = 0;
  for (const auto& addr : a.domain_addresses()) refused += fabric_->stats(addr)->refused_again;
  EXPECT_GT(refused, 0u);
  // submit_* back-pressure depends on timing, so it is reported, not asserted.
  std::printf("submissions pushed back %zu times, domain posts refused %llu times\n", pushed_back,
              static_cast<unsigned long long>(refused));
}

// add_peer_group resolves the peers on every group's worker, one group after the other. When
// the second group cannot, the call returns that group's error and no handle; the first group's
// table is dropped again (it would sit under an id no handle names). A later call, with the
// fault gone, makes a group a scatter can use.
TEST_F(EngineOnFakeDomains, APeerGroupOneGroupCannotResolveIsRefusedAndALaterOneWorks) {
  Node& b = add_node();
  Node& c = add_node();
  Node& a = add_node(1, 2);
  ASSERT_TRUE(a.engine && b.engine && c.engine);
  ASSERT_EQ(a.engine->num_groups(), 2u);
  const std::vector<NetAddr> peers = {b.engine->main_address(), c.engine->main_address()};
  // Group 0 resolves one address per peer (one group of one Domain each): calls 1 and 2.
  fabric_->fail_nth_resolve(3);
  auto refused = a.engine->add_peer_group(peers);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Errc::provider) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("fail_nth_resolve"), std::string::npos)
      << refused.status().to_string();

  auto group = a.engine->add_peer_group(peers);
  ASSERT_TRUE(group.ok()) << group.status().to_string();
  fill(a, 3);
  auto counter_b = b.engine->imm_counter(kImm);
  auto counter_c = c.engine->imm_counter(kImm);
  ASSERT_TRUE(counter_b.ok() && counter_c.ok());
  Scatter scatter;
  scatter.src = a.reg.handle;
  scatter.imm = kImm;
  scatter.group = *group;
  scatter.slices = {{b.reg.desc, 512, 0, 64}, {c.reg.desc, 256, 1024, 128}};
  auto done = std::make_shared<CompletionFlag>();
  ASSERT_TRUE(a.engine->submit_scatter(scatter, done).ok());
  ASSERT_TRUE(done->wait(kWait).ok()) << done->status().to_string();
  EXPECT_TRUE(landed(b, 64, 0, 512, 3));
  EXPECT_TRUE(landed(c, 128, 1024, 256, 3));
  EXPECT_TRUE((*counter_b)->wait(1, kWait).ok());
  EXPECT_TRUE((*counter_c)->wait(1, kWait).ok());
}

TEST_F(EngineOnFakeDomains, WithPostOnSubmitTheSubmittingThreadPostsFirstWritesAndAllLand) {
  for (const bool on : {false, true}) {
    SCOPED_TRACE(on ? "post_on_submit" : "worker posts");
    post_on_submit_ = on;
    nodes_.clear();
    Node& a = add_node(2);
    Node& b = add_node(2);
    ASSERT_TRUE(a.engine && b.engine);
    fill(a, 3);
    // 40 single writes, each sharded over a's 2 Domains (the second WRITE is the worker's),
    // then one 64-page write; each waited for, so the worker is idle before the next.
    constexpr int kWrites = 40;
    for (int i = 0; i < kWrites; ++i) {
      auto flag = std::make_shared<CompletionFlag>();
      const std::uint64_t off = static_cast<std::uint64_t>(i) * 1000;
      ASSERT_TRUE(a.engine->submit_single_write({1000, std::nullopt, {a.reg.handle, off},
                                                 {b.reg.desc, off}}, flag)
                      .ok());
      ASSERT_TRUE(flag->wait(kWait).ok()) << flag->status().to_string();
    }
    EXPECT_TRUE(landed(b, 0, 0, kWrites * 1000, 3));
    PagedWrite paged;
    paged.page_length = 128;
    paged.src = a.reg.handle;
    paged.dst = b.reg.desc;
    for (std::uint32_t p = 0; p < 64; ++p) {
      paged.src_pages.indices.push_back(p);
      paged.dst_pages.indices.push_back(63 - p);
    }
    paged.src_pages.stride = paged.dst_pages.stride = 128;
    paged.src_pages.offset = 0;
    paged.dst_pages.offset = 49152;
    auto flag = std::make_shared<CompletionFlag>();
    ASSERT_TRUE(a.engine->submit_paged_writes(paged, flag).ok());
    ASSERT_TRUE(flag->wait(kWait).ok()) << flag->status().to_string();
    for (std::uint32_t p = 0; p < 64; ++p) {
      EXPECT_TRUE(landed(b, 49152 + (63 - p) * 128, p * 128, 128, 3)) << "page " << p;
    }
    std::uint64_t by_callers = 0;
    std::uint64_t by_workers = 0;
    for (const auto& address : a.domain_addresses()) {
      auto stats = fabric_->stats(address);
      ASSERT_NE(stats, nullptr);
      by_callers += stats->writes_from_others.load();
      by_workers += stats->writes_from_opener.load();
    }
    EXPECT_EQ(by_callers + by_workers, kWrites * 2 + 64u);
    std::printf("[ posts    ] post_on_submit %s: %llu by callers, %llu by workers\n",
                on ? "on" : "off", static_cast<unsigned long long>(by_callers),
                static_cast<unsigned long long>(by_workers));
    if (!on) {
      EXPECT_EQ(by_callers, 0u);
    } else {
      // At most one WRITE per request; at least one, since the worker sleeps between them.
      EXPECT_GE(by_callers, 1u);
      EXPECT_LE(by_callers, kWrites + 1u);
    }
  }
}

}  // namespace
}  // namespace fabric
