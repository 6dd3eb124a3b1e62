// Soak: 8 submitting threads × 4 peer processes, mixing single, paged,
// immediate-only, send and scatter operations for FABRIC_SOAK_SECONDS
// (default 3) on FABRIC_SOAK_PROVIDER (default shm). Checked at the end:
// every byte of every peer's region, each peer's immediate and message counts
// exactly, every completion exactly once, and the parent's VmRSS growth after
// warm-up below kMaxRssGrowth.
//
// Layout: thread t owns [t*kArea, (t+1)*kArea) of every peer's region, and
// its source is the same range of one registered buffer whose bytes never
// change. Every operation copies source offset x to destination offset x, so
// whatever lands in whatever order, the final region equals the source; the
// first operations of each thread cover its whole area on every peer.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "doubles/domain_decorator.hpp"
#include "doubles/reordering_domain.hpp"
#include "fabric_test/sync.hpp"
#include "fixture.hpp"

namespace fabric::conformance {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kThreads = 8;
constexpr std::size_t kPeers = 4;
constexpr std::uint64_t kArea = 64 * 1024;
constexpr std::uint64_t kRegion = kThreads * kArea;
// Sub-areas of a thread's area, by operation.
constexpr std::uint64_t kSingleBase = 0, kSingleLen = 16 * 1024;
constexpr std::uint64_t kPagedBase = 16 * 1024, kPage = 512, kPages = 64;  // 32 KiB
constexpr std::uint64_t kScatterBase = 48 * 1024, kScatterLen = 16 * 1024;
constexpr std::uint32_t kImm = 0x50AC;
constexpr std::uint32_t kMaxInFlightPerThread = 256;
constexpr std::uint32_t kRecvBuffers = 256;
constexpr std::size_t kMaxMessage = 4096;
constexpr long kMaxRssGrowthKiB = 64 * 1024;

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::strtoull(v, nullptr, 0) : fallback;
}

std::string env_string(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : fallback;
}

long vm_rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

std::byte source_byte(std::uint64_t x) { return std::byte(1 + (x * 2654435761u >> 7) % 255); }

// A SEND's bytes: thread, sequence, then a pattern of both, so a peer can
// verify each message on its own.
std::vector<std::byte> make_message(std::uint32_t thread, std::uint32_t seq, std::size_t len) {
  std::vector<std::byte> m(len);
  std::memcpy(m.data(), &thread, 4);
  std::memcpy(m.data() + 4, &seq, 4);
  for (std::size_t i = 8; i < len; ++i) m[i] = std::byte((thread * 7 + seq * 13 + i) & 0xff);
  return m;
}

bool message_ok(std::span<const std::byte> m) {
  if (m.size() < 8) return false;
  std::uint32_t thread = 0, seq = 0;
  std::memcpy(&thread, m.data(), 4);
  std::memcpy(&seq, m.data() + 4, 4);
  if (thread >= kThreads) return false;
  for (std::size_t i = 8; i < m.size(); ++i) {
    if (m[i] != std::byte((thread * 7 + seq * 13 + i) & 0xff)) return false;
  }
  return true;
}

struct PeerReport {
  std::uint64_t messages_ok;
  std::uint64_t messages_bad;
  long rss_kib;
};

// A peer: zeroed region, a counter for kImm, a pool of receive buffers that
// verifies each message. On the parent's (expected imms, expected messages)
// it checks both exactly and sends back a report and its region.
int peer_body(test::Channel& channel, const EngineConfig& config, std::chrono::milliseconds run) {
  auto engine = child_engine(config);
  CHILD_REQUIRE(engine != nullptr, "no engine");
  std::vector<std::byte> region(kRegion);
  auto reg = engine->reg_mr(region.data(), region.size());
  CHILD_REQUIRE_OK(reg.status());
  auto counter = engine->imm_counter(kImm);
  CHILD_REQUIRE_OK(counter.status());
  std::atomic<std::uint64_t> ok{0}, bad{0};
  CHILD_REQUIRE_OK(engine->submit_recvs(config.max_message_size, kRecvBuffers,
                                        [&](std::span<const std::byte> m) {
                                          (message_ok(m) ? ok : bad).fetch_add(1);
                                        }));
  CHILD_REQUIRE(channel.send_desc(reg->desc), "sending the MrDesc");
  auto expected = channel.recv_pod<std::array<std::uint64_t, 2>>(run + kWait + kWait);
  CHILD_REQUIRE(expected.has_value(), "no counts from the parent");
  CHILD_REQUIRE_OK((*counter)->wait_and_consume((*expected)[0], kWait));
  const auto deadline = Clock::now() + kWait;
  while (ok.load() + bad.load() < (*expected)[1] && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polls a count
  }
  // Negative check: no surplus immediate or message in a quiet period.
  CHILD_REQUIRE(!(*counter)->wait(1, kQuiet).ok(),
                std::to_string((*counter)->value()) + " surplus immediates");
  const PeerReport report{ok.load(), bad.load(), vm_rss_kib()};
  CHILD_REQUIRE(channel.send_pod(report), "sending the report");
  CHILD_REQUIRE(channel.send_bytes(region), "sending the region");
  CHILD_REQUIRE(channel.expect("bye", kWait), "no goodbye");
  engine->stop();
  return test::kChildOk;
}

// Each submission's id must come back exactly once.
class Ledger {
 public:
  void issue(std::uint64_t id) {
    std::lock_guard lock(mutex_);
    pending_.insert(id);
  }
  void forget(std::uint64_t id) {  // submit refused: no completion will come
    std::lock_guard lock(mutex_);
    pending_.erase(id);
  }
  void complete(std::uint64_t id, const Status& st) {
    std::lock_guard lock(mutex_);
    if (pending_.erase(id) != 1) ++unknown_or_duplicate_;
    ++completed_;
    if (!st.ok() && first_error_.ok()) first_error_ = st;
  }
  std::size_t pending() {
    std::lock_guard lock(mutex_);
    return pending_.size();
  }
  std::uint64_t unknown_or_duplicate() {
    std::lock_guard lock(mutex_);
    return unknown_or_duplicate_;
  }
  std::uint64_t completed() {
    std::lock_guard lock(mutex_);
    return completed_;
  }
  Status first_error() {
    std::lock_guard lock(mutex_);
    return first_error_;
  }

 private:
  std::mutex mutex_;
  std::unordered_set<std::uint64_t> pending_;
  std::uint64_t unknown_or_duplicate_ = 0;
  std::uint64_t completed_ = 0;
  Status first_error_;
};

struct Totals {
  std::atomic<std::uint64_t> single{0}, paged{0}, pages{0}, imm{0}, send{0}, scatter{0};
  std::atomic<std::uint64_t> bytes{0};
  std::array<std::atomic<std::uint64_t>, kPeers> imms{};
  std::array<std::atomic<std::uint64_t>, kPeers> messages{};
};

// Turns the reordering seam on for engines created (and children forked)
// while it lives.
class ReorderScope {
 public:
  explicit ReorderScope(std::uint64_t seed) {
    domain::set_test_decorator([seed, n = std::make_shared<std::atomic<std::uint64_t>>(0)](
                                   std::unique_ptr<domain::Domain> inner) {
      domain::ReorderOptions options;
      options.seed = seed + n->fetch_add(1) + 1000 * static_cast<std::uint64_t>(::getpid());
      return std::unique_ptr<domain::Domain>(
          std::make_unique<domain::ReorderingDomain>(std::move(inner), options));
    });
  }
  ReorderScope(const ReorderScope&) = delete;
  ReorderScope& operator=(const ReorderScope&) = delete;
  ~ReorderScope() { domain::set_test_decorator({}); }
};

// The parameter: whether every Domain, the parent's and the peers', hands its
// completions and arrivals over shuffled and late (docs/reordering.md).
class Soak : public ::testing::TestWithParam<bool> {};

TEST_P(Soak, ThreadsAndPeersMixingEveryOperation) {
  const auto run = std::chrono::milliseconds(env_u64("FABRIC_SOAK_SECONDS", 3) * 1000);
  const std::string provider = env_string("FABRIC_SOAK_PROVIDER", "shm");
  FABRIC_SKIP_IF_UNAVAILABLE(provider);
  EngineConfig config = engine_config(provider);
  config.max_message_size = kMaxMessage;
  // Before forking, so the peers inherit it.
  std::optional<ReorderScope> reorder;
  if (GetParam()) reorder.emplace(env_u64("FABRIC_TEST_REORDER_SEED", 20261129));
  const auto seam_before = domain::reorder_totals();

  std::vector<ChildProcess> peers;
  const auto lifetime = std::chrono::duration_cast<std::chrono::seconds>(run) + kChildLifetime;
  for (std::size_t p = 0; p < kPeers; ++p) {
    peers.push_back(test::spawn_child(
        [config, run](test::Channel& ch) { return peer_body(ch, config, run); }, lifetime));
  }
  std::vector<MrDesc> dsts;
  std::vector<NetAddr> addrs;
  for (auto& peer : peers) {
    auto desc = peer.channel().recv_desc(kWait);
    ASSERT_TRUE(desc.has_value()) << "a peer sent no MrDesc";
    addrs.push_back(desc->owner());
    dsts.push_back(std::move(*desc));
  }

  Ledger ledger;
  Totals totals;
  std::vector<std::shared_ptr<CompletionCounter>> imm_done(kThreads);
  std::vector<std::uint64_t> imm_issued(kThreads, 0);
  std::vector<std::byte> src(kRegion);
  for (std::uint64_t x = 0; x < kRegion; ++x) src[x] = source_byte(x);
  std::atomic<bool> failed{false};
  long rss_warm = -1;
  std::array<std::atomic<std::uint32_t>, kThreads> in_flight{};
  {
    ASSERT_ENGINE(engine, config);
    StopGuard stop(engine.get());
    auto reg = engine->reg_mr(src.data(), src.size());
    ASSERT_OK(reg);
    auto group = engine->add_peer_group(addrs);
    ASSERT_OK(group);

    const auto start = Clock::now();
    const auto end = start + run;
    auto worker = [&](std::size_t t) {
      std::mt19937_64 rng(0x50a4 + t);
      imm_done[t] = std::make_shared<CompletionCounter>();
      const std::uint64_t base = t * kArea;
      std::uint32_t seq = 0;
      // Callback completions: ledger entry plus this thread's in-flight slot.
      auto tracked = [&, t](std::uint64_t id) {
        ledger.issue(id);
        in_flight[t].fetch_add(1);
        return OnDone(DoneCallback([&, t, id](const Status& st) {
          ledger.complete(id, st);
          in_flight[t].fetch_sub(1);
        }));
      };
      auto submit = [&](std::uint64_t id, auto&& call) {
        for (;;) {
          const Status st = call();
          if (st.ok()) return true;
          if (st.code() != Errc::again) {
            ledger.forget(id);
            ADD_FAILURE() << "thread " << t << ": " << st.to_string();
            failed = true;
            return false;
          }
          std::this_thread::yield();
        }
      };
      // First: cover the whole area on every peer, so every byte is checked.
      for (std::size_t p = 0; p < kPeers && !failed; ++p) {
        const std::uint64_t id = (std::uint64_t{t} << 40) | seq++;
        SingleWrite w;
        w.length = kArea;
        w.src = {reg->handle, base};
        w.dst = {dsts[p], base};
        w.imm = kImm;
        OnDone done = tracked(id);
        if (!submit(id, [&] { return engine->submit_single_write(w, done); })) {
          in_flight[t].fetch_sub(1);
          return;
        }
        totals.single++;
        totals.imms[p]++;
        totals.bytes += kArea;
      }
      while (Clock::now() < end && !failed) {
        while (in_flight[t].load() >= kMaxInFlightPerThread && !failed) {
          std::this_thread::yield();  // bounded by the engine's request_timeout
        }
        const std::uint64_t id = (std::uint64_t{t} << 40) | seq;
        const std::size_t p = rng() % kPeers;
        const unsigned kind = rng() % 5;
        bool ok = false;
        if (kind == 0) {
          SingleWrite w;
          w.length = 1 + rng() % kSingleLen;
          const std::uint64_t off = base + kSingleBase + rng() % (kSingleLen - w.length + 1);
          w.src = {reg->handle, off};
          w.dst = {dsts[p], off};
          if (seq % 2 == 0) w.imm = kImm;  // writes without imm count 0
          OnDone done = tracked(id);
          ok = submit(id, [&] { return engine->submit_single_write(w, done); });
          if (ok) {
            totals.single++;
            totals.bytes += w.length;
            if (w.imm) totals.imms[p]++;
          }
        } else if (kind == 1) {
          PagedWrite pw;
          pw.page_length = kPage;
          pw.imm = kImm;
          pw.src = reg->handle;
          pw.dst = dsts[p];
          std::vector<std::uint32_t> idx(1 + rng() % 16);
          for (auto& i : idx) i = static_cast<std::uint32_t>(rng() % kPages);
          pw.src_pages = {idx, kPage, base + kPagedBase};
          pw.dst_pages = {idx, kPage, base + kPagedBase};
          OnDone done = tracked(id);
          ok = submit(id, [&] { return engine->submit_paged_writes(pw, done); });
          if (ok) {
            totals.paged++;
            totals.pages += idx.size();
            totals.bytes += idx.size() * kPage;
            totals.imms[p] += idx.size();
          }
        } else if (kind == 2) {
          // Counted, not called back: exactness by the counter's total.
          ok = submit(id, [&] { return engine->submit_imm(kImm, dsts[p], imm_done[t]); });
          if (ok) {
            ++imm_issued[t];
            totals.imm++;
            totals.imms[p]++;
          }
        } else if (kind == 3) {
          const auto message = make_message(static_cast<std::uint32_t>(t), seq,
                                            8 + rng() % (kMaxMessage - 8 + 1));
          OnDone done = tracked(id);
          ok = submit(id, [&] { return engine->submit_send(addrs[p], message, done); });
          if (ok) {
            totals.send++;
            totals.messages[p]++;
            totals.bytes += message.size();
          }
        } else {
          Scatter sc;
          sc.group = *group;
          sc.src = reg->handle;
          sc.imm = kImm;
          for (std::size_t q = 0; q < kPeers; ++q) {
            ScatterSlice s;
            s.dst = dsts[q];
            s.length = 1 + rng() % kScatterLen;
            s.src_offset = base + kScatterBase + rng() % (kScatterLen - s.length + 1);
            s.dst_offset = s.src_offset;
            sc.slices.push_back(std::move(s));
          }
          OnDone done = tracked(id);
          ok = submit(id, [&] { return engine->submit_scatter(sc, done); });
          if (ok) {
            totals.scatter++;
            for (std::size_t q = 0; q < kPeers; ++q) {
              totals.imms[q]++;
              totals.bytes += sc.slices[q].length;
            }
          }
        }
        if (!ok && kind != 2) in_flight[t].fetch_sub(1);
        ++seq;
      }
    };

    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
    // Warm-up: the first fifth of the run (pools, queues and arenas reach size).
    const auto warm = start + run / 5;
    while (Clock::now() < warm && !failed) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // waits for a time point
    }
    rss_warm = vm_rss_kib();
    for (auto& th : threads) th.join();
    ASSERT_FALSE(failed);

    // All completions, bounded.
    const auto deadline = Clock::now() + kWait;
    while (ledger.pending() > 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polls a count
    }
    ASSERT_EQ(ledger.pending(), 0u) << "requests never completed";
    for (std::size_t t = 0; t < kThreads; ++t) {
      ASSERT_OK(imm_done[t]->wait(imm_issued[t], kWait));
    }
    const long rss_end = vm_rss_kib();
    // Negative check: nothing completes twice after the fact.
    std::this_thread::sleep_for(kQuiet);
    EXPECT_EQ(ledger.unknown_or_duplicate(), 0u);
    EXPECT_OK(ledger.first_error());
    for (std::size_t t = 0; t < kThreads; ++t) {
      EXPECT_EQ(imm_done[t]->completed(), imm_issued[t]) << "thread " << t;
      EXPECT_EQ(imm_done[t]->failed(), 0u);
    }

    std::uint64_t total_imms = 0;
    for (std::size_t p = 0; p < kPeers; ++p) {
      const std::array<std::uint64_t, 2> expected{totals.imms[p].load(), totals.messages[p].load()};
      total_imms += expected[0];
      ASSERT_TRUE(peers[p].channel().send_pod(expected));
    }
    for (std::size_t p = 0; p < kPeers; ++p) {
      auto report = peers[p].channel().recv_pod<PeerReport>(kWait + kWait);
      ASSERT_TRUE(report.has_value()) << "peer " << p << " reported nothing (see its stderr)";
      EXPECT_EQ(report->messages_ok, totals.messages[p].load()) << "peer " << p;
      EXPECT_EQ(report->messages_bad, 0u) << "peer " << p;
      auto region = peers[p].channel().recv_bytes(kWait);
      ASSERT_TRUE(region.has_value());
      ASSERT_EQ(region->size(), kRegion);
      for (std::uint64_t x = 0; x < kRegion; ++x) {
        ASSERT_EQ((*region)[x], src[x]) << "peer " << p << " byte " << x;
      }
      std::printf("[soak] peer %zu: %llu immediates, %llu messages, VmRSS %ld KiB\n", p,
                  static_cast<unsigned long long>(totals.imms[p].load()),
                  static_cast<unsigned long long>(report->messages_ok), report->rss_kib);
    }
    for (auto& peer : peers) peer.channel().send_string("bye");
    const double seconds = std::chrono::duration<double>(run).count();
    std::printf("[soak] %s%s, %.1f s: %llu completions exactly once (%llu single, %llu paged / "
                "%llu pages, %llu imm, %llu send, %llu scatter), %llu immediates, %.1f MiB "
                "written (final regions verified byte by byte); VmRSS %ld KiB after warm-up, %ld KiB at the end "
                "(growth %ld KiB)\n",
                provider.c_str(), GetParam() ? " reordered" : "", seconds,
                static_cast<unsigned long long>(ledger.completed() + totals.imm.load()),
                static_cast<unsigned long long>(totals.single.load()),
                static_cast<unsigned long long>(totals.paged.load()),
                static_cast<unsigned long long>(totals.pages.load()),
                static_cast<unsigned long long>(totals.imm.load()),
                static_cast<unsigned long long>(totals.send.load()),
                static_cast<unsigned long long>(totals.scatter.load()),
                static_cast<unsigned long long>(total_imms), totals.bytes.load() / 1048576.0,
                rss_warm, rss_end, rss_end - rss_warm);
    EXPECT_LT(rss_end - rss_warm, kMaxRssGrowthKiB) << "VmRSS grew during the soak";
    if (GetParam()) {
      const auto seam = domain::reorder_totals();
      const std::uint64_t reordered = seam.reordered - seam_before.reordered;
      std::printf("[soak] parent's seam: %llu events pulled, %llu released out of order\n",
                  static_cast<unsigned long long>(seam.pulled - seam_before.pulled),
                  static_cast<unsigned long long>(reordered));
      EXPECT_GT(reordered, 0u) << "the seam was not in the path";
    }
  }
  for (std::size_t p = 0; p < kPeers; ++p) {
    const auto exit = peers[p].wait_exit(kWait);
    EXPECT_TRUE(exit.ok()) << "peer " << p << ": " << exit.to_string();
  }
}

INSTANTIATE_TEST_SUITE_P(Order, Soak, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "reordered" : "plain");
                         });

}  // namespace
}  // namespace fabric::conformance
