// 32 engines started at once on one host, each its own process (vllm#55000, nixl#1668:
// start-up hangs with many agents on one host): every pair exchanges an immediate within a
// bound, measured from the moment all 32 processes were started.

#include <algorithm>
#include <vector>

#include "field_test.hpp"
#include "peer_process.hpp"
#include "peer_roles.hpp"

namespace fabric::field {
namespace {

constexpr std::uint32_t kEngines = 32;
// Generous: 32 engines opening at once on 2 loaded cores; each takes about 0.4 s alone.
constexpr std::chrono::seconds kBound{90};

class ManyEngines : public FieldTest {};

TEST_P(ManyEngines, ThirtyTwoStartedAtOnceConnectEveryPairWithinTheBound) {
  const auto start = Clock::now();
  std::vector<test::ChildProcess> engines;
  for (std::uint32_t i = 0; i < kEngines; ++i) {
    engines.push_back(spawn_peer(PeerSpec{"mesh", provider()}));
  }
  std::vector<MrDesc> descs;
  for (auto& e : engines) {
    auto desc = e.channel().recv_desc(kBound);
    ASSERT_TRUE(desc.has_value()) << "engine " << descs.size() << ": " << e.channel().last_error()
                                  << "; process " << e.wait_exit(kWait).to_string();
    descs.push_back(*desc);
  }
  const auto all_up = Clock::now();
  for (std::uint32_t i = 0; i < kEngines; ++i) {
    auto& ch = engines[i].channel();
    ASSERT_TRUE(ch.send_pod(i) && ch.send_pod(kEngines));
    for (const auto& d : descs) ASSERT_TRUE(ch.send_desc(d));
  }
  std::uint64_t slowest_pairs_ms = 0;
  for (std::uint32_t i = 0; i < kEngines; ++i) {
    auto& ch = engines[i].channel();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(start + kBound - Clock::now());
    auto st = ch.recv_status(std::max(left, std::chrono::milliseconds(1)));
    ASSERT_TRUE(st.has_value()) << "engine " << i << " did not finish within " << kBound.count()
                                << " s of the start: " << ch.last_error();
    EXPECT_TRUE(st->ok()) << "engine " << i << ": " << st->to_string();
    auto report = ch.recv_pod<MeshReport>(kWait);
    ASSERT_TRUE(report.has_value()) << ch.last_error();
    slowest_pairs_ms = std::max(slowest_pairs_ms, report->connect_ms);
  }
  const auto all_done = Clock::now();
  for (auto& e : engines) EXPECT_TRUE(e.channel().send_string("quit"));
  for (std::uint32_t i = 0; i < kEngines; ++i) {
    EXPECT_TRUE(engines[i].channel().expect("bye", kWait)) << "engine " << i;
    const auto exit = engines[i].wait_exit(kWait);
    EXPECT_TRUE(exit.ok()) << "engine " << i << ": " << exit.to_string();
  }
  std::printf("[field] many-engines/%s: %u engines started at once: all up in %lld ms, all %u "
              "pairs exchanged an immediate %lld ms after the start (slowest engine's own pairs: "
              "%llu ms); bound %lld s\n",
              provider().c_str(), kEngines, static_cast<long long>(ms(all_up - start)),
              kEngines * (kEngines - 1), static_cast<long long>(ms(all_done - start)),
              static_cast<unsigned long long>(slowest_pairs_ms),
              static_cast<long long>(kBound.count()));
  EXPECT_LE(all_done - start, kBound);
}

FABRIC_FIELD_PROVIDERS(ManyEngines);

}  // namespace
}  // namespace fabric::field
