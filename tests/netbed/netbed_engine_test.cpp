// Engines on distinct emulated hosts (tools/netbed, docs/netbed.md): each
// Domain of a group bound to its own rate-limited NIC, the bytes counted by
// the NICs themselves. Two hosts x two NICs; the writer runs in h0, the
// target in h1, each a forked child that setns()es into its host before it
// creates its engine, so no engine thread ever sees the root namespace.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fabric/fabric.hpp"
#include "fabric_test/channel.hpp"
#include "fabric_test/child_process.hpp"
#include "fabric_test/data.hpp"
#include "fabric_test/netbed.hpp"
#include "fabric_test/sync.hpp"

namespace fabric {
namespace {

using namespace std::chrono_literals;
using test::Channel;
using test::ChildProcess;
using test::Netbed;
using test::NetbedOptions;

constexpr int kWriterHost = 0;
constexpr int kTargetHost = 1;
constexpr int kNics = 2;
constexpr std::uint32_t kImm = 42;
constexpr std::chrono::seconds kChildLifetime{100};
constexpr std::chrono::milliseconds kWait{30000};
constexpr std::chrono::milliseconds kRequestTimeout{3000};

NetbedOptions two_hosts(std::string rate, std::string loss = {}) {
  NetbedOptions o;
  o.hosts = 2;
  o.nics = kNics;
  o.rate = std::move(rate);
  o.loss = std::move(loss);
  return o;
}

EngineConfig host_config(const std::string& provider) {
  EngineConfig c;
  c.provider = provider;
  c.domains_per_group = kNics;
  for (int k = 0; k < kNics; ++k) c.nics.push_back(Netbed::interface(k));
  c.request_timeout = kRequestTimeout;
  return c;
}

// Both children start the same way: into the host, an engine, the NIC each
// Domain got reported to the parent, one registered buffer.
struct HostEngine {
  std::unique_ptr<TransferEngine> engine;
  std::vector<std::byte> buffer;
  Registered reg;
};

Result<HostEngine> start_host(Channel& ch, const Netbed& bed, int host, const EngineConfig& cfg,
                              std::size_t bytes) {
  if (auto st = bed.enter(host); !st.ok()) return st;
  auto engine = TransferEngine::create(cfg);
  if (!engine) return engine.status();
  HostEngine h{std::move(engine).value(), std::vector<std::byte>(bytes), {}};
  for (const DomainNic& nic : h.engine->domain_nics()) {
    if (!ch.send_string(nic.interface + " " + nic.address)) {
      return Status(Errc::timeout, ch.last_error());
    }
  }
  auto reg = h.engine->reg_mr(h.buffer.data(), h.buffer.size());
  if (!reg) return reg.status();
  h.reg = std::move(reg).value();
  return h;
}

// Target: checks the bytes once the parent says how many immediates to await.
int target_main(Channel& ch, const Netbed& bed, const EngineConfig& cfg, std::size_t bytes) {
  auto started = start_host(ch, bed, kTargetHost, cfg, bytes);
  CHILD_REQUIRE_OK(started.status());
  HostEngine& h = started.value();
  auto counter = h.engine->imm_counter(kImm);
  CHILD_REQUIRE_OK(counter.status());
  CHILD_REQUIRE(ch.send_desc(h.reg.desc), ch.last_error());
  for (;;) {
    auto cmd = ch.recv_string();
    CHILD_REQUIRE(cmd.has_value(), ch.last_error());
    std::istringstream in(*cmd);
    std::string verb;
    in >> verb;
    if (verb == "exit") break;
    if (verb == "surplus") {
      // Arrivals beyond every expected one: a completion delivered twice.
      CHILD_REQUIRE(ch.send_string(std::to_string(counter.value()->value())), ch.last_error());
      continue;
    }
    CHILD_REQUIRE(verb == "check", *cmd);
    std::uint64_t seed = 0, imms = 0;
    in >> seed >> imms;
    Status st = counter.value()->wait_and_consume(imms, kWait);
    std::string verdict = "ok";
    if (!st.ok()) {
      verdict = st.to_string();
    } else if (auto same = test::bytes_equal(h.buffer, test::random_bytes(bytes, seed)); !same) {
      verdict = same.message();
    }
    CHILD_REQUIRE(ch.send_string(verdict), ch.last_error());
  }
  h.engine->stop();
  return test::kChildOk;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// N requests in flight at once, each one's completions counted. Shared with
// the callbacks, so it outlives anything the engine may still deliver.
struct Burst : std::enable_shared_from_this<Burst> {
  explicit Burst(std::uint32_t capacity) : calls(capacity), codes(capacity) {}
  Status submit(TransferEngine& engine, const Registered& src, const MrDesc& dst, std::uint32_t i,
                std::uint64_t len, std::uint64_t offset) {
    SingleWrite w;
    w.length = len;
    w.imm = kImm;
    w.src = {src.handle, offset};
    w.dst = {dst, offset};
    auto self = shared_from_this();
    Status st = engine.submit_single_write(
        w, DoneCallback([self, i](const Status& s) { self->complete(i, s); }));
    if (st.ok()) submitted.fetch_add(1);
    return st;
  }
  void complete(std::uint32_t i, const Status& s) {
    codes[i].store(static_cast<int>(s.code()));
    calls[i].fetch_add(1);
    last_ns.store(now_ns());
    done.add();
  }
  [[nodiscard]] std::uint32_t twice() const {
    std::uint32_t t = 0;
    for (const auto& c : calls) t += c.load() > 1 ? 1 : 0;
    return t;
  }
  [[nodiscard]] std::string report(std::int64_t killed_ns) const {
    std::uint32_t seen = 0, ok = 0, failed = 0;
    for (std::size_t i = 0; i < submitted.load(); ++i) {
      if (calls[i].load() == 0) continue;
      ++seen;
      (codes[i].load() == 0 ? ok : failed)++;
    }
    const std::int64_t after_kill_ms = killed_ns == 0 ? 0 : (last_ns.load() - killed_ns) / 1000000;
    return fmt::format("completed {} of {} ok {} failed {} twice {} last_after_kill_ms {}", seen,
                       submitted.load(), ok, failed, twice(), after_kill_ms);
  }
  std::vector<std::atomic<int>> calls;
  std::vector<std::atomic<int>> codes;
  std::atomic<std::int64_t> last_ns{0};
  std::atomic<std::uint32_t> submitted{0};
  test::WaitableCount done;
};

// Writer: "write SEED pin K | shard" (one request, waited for), "burst SEED
// N" (N requests in flight at once) and "stream SEED N" (a burst during which
// the parent kills the target's host).
int writer_main(Channel& ch, const Netbed& bed, const EngineConfig& cfg, std::size_t bytes) {
  auto started = start_host(ch, bed, kWriterHost, cfg, bytes);
  CHILD_REQUIRE_OK(started.status());
  HostEngine& h = started.value();
  std::vector<std::shared_ptr<Burst>> bursts;
  auto dst = ch.recv_desc();
  CHILD_REQUIRE(dst.has_value(), ch.last_error());
  for (;;) {
    auto cmd = ch.recv_string();
    CHILD_REQUIRE(cmd.has_value(), ch.last_error());
    std::istringstream in(*cmd);
    std::string verb;
    std::uint64_t seed = 0;
    in >> verb >> seed;
    if (verb == "exit") break;
    test::fill_random(h.buffer, seed);
    if (verb == "write") {
      std::string mode;
      std::uint32_t domain = 0;
      in >> mode >> domain;
      SingleWrite w;
      w.length = bytes;
      w.imm = kImm;
      w.src = {h.reg.handle, 0};
      w.dst = {*dst, 0};
      w.routing = mode == "pin" ? WriteRouting::pinned(domain) : WriteRouting::all_domains();
      auto flag = std::make_shared<CompletionFlag>();
      Status st = h.engine->submit_single_write(w, flag);
      if (st.ok()) st = flag->wait(kWait);
      CHILD_REQUIRE(ch.send_status(st), ch.last_error());
      continue;
    }
    CHILD_REQUIRE(verb == "burst" || verb == "stream", *cmd);
    std::uint32_t n = 0;
    in >> n;
    if (verb == "burst") {
      // n writes of bytes/n each, all in flight at once, sharded over every NIC.
      auto burst = std::make_shared<Burst>(n);
      bursts.push_back(burst);
      const std::uint64_t len = bytes / n;
      for (std::uint32_t i = 0; i < n; ++i) {
        CHILD_REQUIRE_OK(burst->submit(*h.engine, h.reg, *dst, i, len, i * len));
      }
      (void)burst->done.wait_for(n, kWait);
      CHILD_REQUIRE(ch.send_string(burst->report(0)), ch.last_error());
      continue;
    }
    // stream: 1 MiB writes, n in flight, until the parent has killed the
    // target's host; then whatever was in flight must fail, bounded.
    constexpr std::uint64_t kLen = 1u << 20;
    constexpr std::uint32_t kMaxRequests = 1u << 16;
    auto burst = std::make_shared<Burst>(kMaxRequests);
    bursts.push_back(burst);
    std::atomic<bool> killed{false};
    std::atomic<std::int64_t> killed_ns{0};
    std::thread listener([&] {
      if (ch.expect("killed", kWait)) killed_ns.store(now_ns());
      killed.store(true);
    });
    bool announced = false;
    std::uint32_t i = 0;
    Status submit_status;
    while (!killed.load() && i < kMaxRequests) {
      if (i < burst->done.value() + n) {
        const std::uint64_t slot = i % (bytes / kLen);
        submit_status = burst->submit(*h.engine, h.reg, *dst, i, kLen, slot * kLen);
        if (!submit_status.ok()) break;
        ++i;
        continue;
      }
      if (!announced && burst->done.value() >= 2) {
        announced = ch.send_string("under way");
        if (!announced) break;
      }
      // Bounded wait for the next completion; the loop re-checks `killed`.
      (void)burst->done.wait_for(i - n + 1, 20ms);
    }
    listener.join();
    CHILD_REQUIRE_OK(submit_status);
    CHILD_REQUIRE(announced && killed_ns.load() != 0, "the stream never got under way");
    (void)burst->done.wait_for(i, kWait);
    CHILD_REQUIRE(ch.send_string(burst->report(killed_ns.load())), ch.last_error());
    break;  // the peer is gone; the engine's stop is what is left
  }
  h.engine->stop();
  // After stop() nothing more can be delivered: any duplicate has shown by now.
  for (const auto& b : bursts) CHILD_REQUIRE(b->twice() == 0, b->report(0));
  return test::kChildOk;
}

class NetbedEngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string reason = Netbed::unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
  }

  // Builds the testbed, forks both hosts and checks each Domain reports the
  // NIC it was asked for.
  void start(const NetbedOptions& options, std::size_t bytes) {
    auto bed = Netbed::up(Netbed::unique_name(GetParam()), options);
    ASSERT_TRUE(bed) << bed.status().to_string();
    bed_ = std::move(bed).value();
    const EngineConfig cfg = host_config(GetParam());
    const Netbed& b = *bed_;
    target_ = test::spawn_child(
        [&b, cfg, bytes](Channel& ch) { return target_main(ch, b, cfg, bytes); }, kChildLifetime);
    writer_ = test::spawn_child(
        [&b, cfg, bytes](Channel& ch) { return writer_main(ch, b, cfg, bytes); }, kChildLifetime);
    for (auto [child, host] : {std::pair{&target_, kTargetHost}, std::pair{&writer_, kWriterHost}}) {
      for (int k = 0; k < kNics; ++k) {
        auto got = child->channel().recv_string();
        ASSERT_TRUE(got) << "host " << host << ": " << child->channel().last_error() << " ("
                         << child->wait_exit(5s).to_string() << ")";
        EXPECT_EQ(*got, Netbed::interface(k) + " " + b.address(host, k))
            << "Domain " << k << " of host " << host;
      }
    }
    auto desc = target_.channel().recv_desc();
    ASSERT_TRUE(desc) << target_.channel().last_error();
    ASSERT_TRUE(writer_.channel().send_desc(*desc));
  }

  std::map<std::string, test::NicCounters> counters(int host) {
    auto c = bed_->counters(host);
    EXPECT_TRUE(c) << c.status().to_string();
    return c ? c.value() : std::map<std::string, test::NicCounters>{};
  }

  void check_target(std::uint64_t seed, std::uint64_t imms) {
    ASSERT_TRUE(target_.channel().send_string(fmt::format("check {} {}", seed, imms)));
    auto verdict = target_.channel().recv_string();
    ASSERT_TRUE(verdict) << target_.channel().last_error();
    EXPECT_EQ(*verdict, "ok");
  }

  void finish() {
    for (ChildProcess* c : {&writer_, &target_}) {
      ASSERT_TRUE(c->channel().send_string("exit"));
      const auto exit = c->wait_exit(30s);
      EXPECT_TRUE(exit.ok()) << exit.to_string();
    }
  }

  std::unique_ptr<Netbed> bed_;
  ChildProcess target_;
  ChildProcess writer_;
};

std::uint64_t tx_delta(const std::map<std::string, test::NicCounters>& before,
                       const std::map<std::string, test::NicCounters>& after, int nic) {
  const std::string name = Netbed::interface(nic);
  return after.at(name).tx_bytes - before.at(name).tx_bytes;
}

std::uint64_t rx_delta(const std::map<std::string, test::NicCounters>& before,
                       const std::map<std::string, test::NicCounters>& after, int nic) {
  const std::string name = Netbed::interface(nic);
  return after.at(name).rx_bytes - before.at(name).rx_bytes;
}

TEST_P(NetbedEngineTest, WritePinnedToDomainKMovesItsBytesOnlyOverNicK) {
  constexpr std::size_t kBytes = 8u << 20;
  ASSERT_NO_FATAL_FAILURE(start(two_hosts("400mbit"), kBytes));
  for (int k = 0; k < kNics; ++k) {
    const auto w0 = counters(kWriterHost);
    const auto t0 = counters(kTargetHost);
    ASSERT_TRUE(writer_.channel().send_string(fmt::format("write {} pin {}", 100 + k, k)));
    auto st = writer_.channel().recv_status();
    ASSERT_TRUE(st) << writer_.channel().last_error();
    ASSERT_TRUE(st->ok()) << st->to_string();
    ASSERT_NO_FATAL_FAILURE(check_target(100 + k, 1));
    const auto w1 = counters(kWriterHost);
    const auto t1 = counters(kTargetHost);
    const int other = 1 - k;
    EXPECT_GE(tx_delta(w0, w1, k), kBytes) << "writer nic" << k;
    EXPECT_GE(rx_delta(t0, t1, k), kBytes) << "target nic" << k;
    // What the other NIC may carry meanwhile: an ARP exchange, no payload.
    EXPECT_LT(tx_delta(w0, w1, other), kBytes / 100) << "writer nic" << other;
    EXPECT_LT(rx_delta(t0, t1, other), kBytes / 100) << "target nic" << other;
  }
  finish();
}

TEST_P(NetbedEngineTest, ShardedWriteMovesItsBytesOverEveryNic) {
  constexpr std::size_t kBytes = 8u << 20;
  ASSERT_NO_FATAL_FAILURE(start(two_hosts("400mbit"), kBytes));
  const auto w0 = counters(kWriterHost);
  ASSERT_TRUE(writer_.channel().send_string("write 7 shard"));
  auto st = writer_.channel().recv_status();
  ASSERT_TRUE(st) << writer_.channel().last_error();
  ASSERT_TRUE(st->ok()) << st->to_string();
  ASSERT_NO_FATAL_FAILURE(check_target(7, kNics));  // one immediate per shard
  const auto w1 = counters(kWriterHost);
  for (int k = 0; k < kNics; ++k) {
    // Each NIC carries its half plus framing (about 1 % at MTU 9000).
    EXPECT_GE(tx_delta(w0, w1, k), kBytes / kNics) << "nic" << k;
    EXPECT_LT(tx_delta(w0, w1, k), kBytes / kNics * 105 / 100) << "nic" << k;
  }
  finish();
}

TEST_P(NetbedEngineTest, UnderOnePercentLossEveryByteArrivesAndEveryCompletionComesOnce) {
  constexpr std::size_t kBytes = 8u << 20;
  constexpr std::uint32_t kRequests = 64;
  ASSERT_NO_FATAL_FAILURE(start(two_hosts("400mbit", "1%"), kBytes));
  ASSERT_TRUE(writer_.channel().send_string(fmt::format("burst 11 {}", kRequests)));
  auto report = writer_.channel().recv_string(kWait + 10s);
  ASSERT_TRUE(report) << writer_.channel().last_error();
  EXPECT_EQ(*report, fmt::format("completed {0} of {0} ok {0} failed 0 twice 0 "
                                 "last_after_kill_ms 0",
                                 kRequests));
  ASSERT_NO_FATAL_FAILURE(check_target(11, std::uint64_t{kRequests} * kNics));
  // The writer is still up: a duplicate would have arrived by now (its
  // completions all came back, so nothing of it is still in flight).
  ASSERT_TRUE(target_.channel().send_string("surplus"));
  auto surplus = target_.channel().recv_string();
  ASSERT_TRUE(surplus);
  EXPECT_EQ(*surplus, "0") << "immediates beyond the " << kRequests * kNics << " expected";
  auto dropped = bed_->dropped_by_loss();
  ASSERT_TRUE(dropped) << dropped.status().to_string();
  EXPECT_GT(dropped.value(), 0u) << "the loss rule dropped nothing: the test proved nothing";
  finish();
}

TEST_P(NetbedEngineTest, HostWhoseNamespaceIsDeletedMidTransferFailsItsRequestsInBoundedTime) {
  constexpr std::size_t kBytes = 16u << 20;
  constexpr std::uint32_t kInFlight = 8;  // 1 MiB writes, streaming until the kill
  ASSERT_NO_FATAL_FAILURE(start(two_hosts("200mbit"), kBytes));
  ASSERT_TRUE(writer_.channel().send_string(fmt::format("stream 5 {}", kInFlight)));
  auto under_way = writer_.channel().recv_string();
  ASSERT_TRUE(under_way) << writer_.channel().last_error();
  ASSERT_TRUE(bed_->kill_host(kTargetHost).ok());
  ASSERT_TRUE(writer_.channel().send_string("killed"));
  auto report = writer_.channel().recv_string(kWait + 10s);
  ASSERT_TRUE(report) << writer_.channel().last_error();
  std::istringstream in(*report);
  std::string w;
  std::uint32_t seen = 0, n = 0, ok = 0, failed = 0, twice = 0;
  std::int64_t after_kill_ms = 0;
  in >> w >> seen >> w >> n >> w >> ok >> w >> failed >> w >> twice >> w >> after_kill_ms;
  ASSERT_TRUE(in) << *report;
  EXPECT_EQ(seen, n) << "requests never completed: " << *report;
  EXPECT_EQ(twice, 0u) << *report;
  EXPECT_GE(ok, 2u) << *report;
  EXPECT_GE(failed, 1u) << "nothing was in flight when the host died: " << *report;
  // request_timeout plus slack for a loaded machine.
  EXPECT_LE(after_kill_ms, kRequestTimeout.count() + 5000) << *report;
  const auto writer_exit = writer_.wait_exit(30s);
  EXPECT_TRUE(writer_exit.ok()) << writer_exit.to_string();
  const auto target_exit = target_.wait_exit(10s);
  EXPECT_EQ(target_exit.kind, test::ChildExit::Kind::signaled) << target_exit.to_string();
}

INSTANTIATE_TEST_SUITE_P(Providers, NetbedEngineTest, ::testing::Values("tcp", "sockets"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace fabric

int main(int argc, char** argv) {
  // Every Domain binds the address of its own NIC: the process-wide interface
  // filters of the IP providers would hide all but one of them.
  ::unsetenv("FI_TCP_IFACE");
  ::unsetenv("FI_SOCKETS_IFACE");
  ::unsetenv("FI_PROVIDER");
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
