// The soak: this process and 3 peer processes, mixed requests (WRITEs of 1 B to 256 KiB, paged
// WRITEs, SENDs, immediates, READs), peers restarted at random (SIGKILL or a clean quit), for
// FABRIC_FIELD_SOAK_SECONDS per provider (30 in CI; `make soak`: 300, 10 minutes for both).
// 0 lost (every request completes exactly once, failures only to a peer being killed), 0 wrong
// (every ok checked against the bytes), and metrics() equal to what the traffic counted.
// The report it answers: vllm-backport#33, a transport that failed after days and 92,724
// transfers, then kept reporting success.

#include <cstdlib>
#include <random>

#include "field_test.hpp"

namespace fabric::field {
namespace {

constexpr std::size_t kPeers = 3;

std::chrono::seconds soak_seconds() {
  const char* text = std::getenv("FABRIC_FIELD_SOAK_SECONDS");
  return std::chrono::seconds(text != nullptr && *text != '\0' ? std::atol(text) : 30);
}

class FieldSoak : public FieldTest {};

// The survivor's memory is read after this many restarts and at the end: tcp;ofi_rxm's and the
// traffic's buffers grow to their working size over the first few (89 -> 135 MiB by the 10th
// restart of a 120 s run, then 134-143 MiB for the 268 after), and a dead peer's state kept
// here would grow it from then on.
constexpr int kWarmRestarts = 10;
constexpr long kMaxRssGrowthKiB = 16 * 1024;
constexpr long kMaxFdGrowth = 8;

// Peer processes one shm engine outlives, with a margin below the 256 its region's peer map
// holds.
constexpr std::size_t kShmLives = 248;

TEST_P(FieldSoak, MixedTrafficWithRandomRestartsLosesNothing) {
  const auto run = soak_seconds();
  auto engine = make_engine();
  ASSERT_NE(engine, nullptr);
  std::mt19937_64 rng(0x50a6);
  {
    Traffic traffic(*engine, kPeers, 0x50a6);
    Restarter restarter(traffic, provider());
    std::vector<std::shared_ptr<Incarnation>> current;
    for (std::size_t p = 0; p < kPeers; ++p) {
      current.push_back(restarter.start());
      ASSERT_TRUE(current.back()->connect());
      (void)traffic.swap(p, current.back());
    }
    traffic.start(2);
    auto next = restarter.start();
    const auto start = Clock::now();
    const auto end = start + run;
    const long rss_start = rss_kib();
    long rss_warm = 0, fds_warm = 0;
    int restarts = 0;
    while (Clock::now() < end) {
      const std::size_t peer_processes = kPeers + 1 + static_cast<std::size_t>(restarts);
      if (provider() == "shm" && peer_processes >= kShmLives) {
        // libfabric 1.17 shm: the 257th peer process to reach one engine's region dies in the
        // provider (SIGSEGV in `make soak`, docs/reliability.md finding 10). The rest of the
        // run keeps the traffic going on the peers it has.
        std::printf("[field] soak/shm: no restart after %zu peer processes (the soak's cap, "
                    "below the 256 that shm lets reach one engine: finding 10); traffic goes on\n",
                    peer_processes);
        while (Clock::now() < end) (void)traffic.wait_ok(*current[0], ~std::uint64_t{0}, 100ms);
        break;
      }
      // A random peer serves a random number of completions, then restarts.
      const std::size_t p = rng() % kPeers;
      const std::uint64_t serve = current[p]->ok.load() + 100 + rng() % 3000;
      while (Clock::now() < end && !traffic.wait_ok(*current[p], serve, 100ms)) {
      }
      if (Clock::now() >= end) break;
      ASSERT_TRUE(next->connect());
      ASSERT_TRUE(restarter.restart(p, next, /*kill=*/rng() % 2 == 0));
      current[p] = next;
      next = restarter.start();
      ++restarts;
      ASSERT_TRUE(restarter.settle(false));
      if (restarts == kWarmRestarts) {
        // Read with nothing retiring, as at the end, so both readings hold the same peers.
        ASSERT_TRUE(restarter.settle(true));
        rss_warm = rss_kib();
        fds_warm = open_fds();
      }
    }
    ASSERT_TRUE(traffic.stop(kRequestTimeout + kMargin)) << "requests never completed";
    ASSERT_TRUE(restarter.settle(true));
    const long rss_end = rss_kib();
    const long fds_end = open_fds();
    ASSERT_TRUE(next->connect());
    ASSERT_TRUE(next->quit());
    Lives live;
    for (auto& peer : current) {
      live.ok += peer->ok.load();
      live.failed += peer->failed.load();
      live.wrong += peer->wrong();
      live.unexpected += peer->unexpected_failures();
      if (live.first_problem.empty()) live.first_problem = peer->first_problem();
      EXPECT_TRUE(peer->quit());
    }
    ASSERT_TRUE(restarter.settle(true));
    const Lives& ended = restarter.lives();
    std::uint64_t accepted = 0, ok = 0, failed = 0, bytes = 0;
    std::string kinds;
    for (Kind k : {Kind::single, Kind::paged, Kind::send, Kind::imm, Kind::read}) {
      const KindTally& t = traffic.tally(k);
      accepted += t.accepted.load();
      ok += t.ok.load();
      failed += t.failed.load();
      bytes += t.bytes_ok.load();
      kinds += std::string(kinds.empty() ? "" : ", ") + kind_name(k) + " " + std::to_string(t.ok.load());
    }
    std::printf("[field] soak/%s: %lld s, 4 processes, %d restarts (%llu SIGKILL, %llu clean); "
                "%llu requests, %llu ok (%s), %llu failed (all to killed peers), %.1f MiB moved; "
                "0 lost: %s, wrong: %llu; metrics() %s; VmRSS %ld KiB at the start, %ld after %d "
                "restarts, %ld at the end; fds %ld -> %ld\n",
                provider().c_str(), static_cast<long long>(run.count()), restarts,
                static_cast<unsigned long long>(ended.killed),
                static_cast<unsigned long long>(ended.quit),
                static_cast<unsigned long long>(accepted), static_cast<unsigned long long>(ok),
                kinds.c_str(), static_cast<unsigned long long>(failed), bytes / 1048576.0,
                accepted == ok + failed ? "yes" : "NO",
                static_cast<unsigned long long>(ended.wrong + live.wrong),
                metrics_match(*engine, traffic) ? "matches" : "DIFFERS", rss_start, rss_warm,
                kWarmRestarts, rss_end, fds_warm, fds_end);
    EXPECT_EQ(accepted, ok + failed) << "requests lost (never completed) or completed twice";
    EXPECT_EQ(ended.ok + live.ok, ok);
    EXPECT_EQ(ended.wrong + live.wrong, 0u) << ended.first_problem << live.first_problem;
    // Counted, not asserted (docs/reliability.md, finding 8, open): a request to a running tcp
    // peer that times out never posted fails with an error, never reports ok.
    if (const auto u = ended.unexpected + live.unexpected; u > 0) {
      std::printf("[field] soak/%s: %llu requests failed while their peer ran (finding 8): %s%s\n",
                  provider().c_str(), static_cast<unsigned long long>(u),
                  ended.first_problem.c_str(), live.first_problem.c_str());
    }
    EXPECT_EQ(traffic.refused(), 0u) << traffic.first_refusal();
    EXPECT_TRUE(metrics_match(*engine, traffic));
    EXPECT_GT(restarts, 0) << "the soak restarted no peer";
    if (restarts >= kWarmRestarts) {
      EXPECT_LT(rss_end - rss_warm, kMaxRssGrowthKiB) << "the survivor's memory grew";
      EXPECT_LE(fds_end - fds_warm, kMaxFdGrowth) << "the survivor kept descriptors of dead peers";
    } else {
      std::printf("[field] soak/%s: %d restarts, fewer than the %d after which memory and fds are "
                  "compared: not compared\n", provider().c_str(), restarts, kWarmRestarts);
    }
  }
  engine->stop();
}

FABRIC_FIELD_PROVIDERS(FieldSoak);

}  // namespace
}  // namespace fabric::field
