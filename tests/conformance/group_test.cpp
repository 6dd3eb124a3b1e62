// Scatter, barrier, peer groups and multi-Domain routing between real
// processes: every byte checked against a mirror of each target's region,
// and each target's immediate count exactly the documented one.

#include <array>
#include <memory>
#include <tuple>
#include <vector>

#include "counting_target.hpp"
#include "fabric_test/data.hpp"

namespace fabric::conformance {
namespace {

constexpr std::uint64_t kRegion = 64 * 1024;
constexpr std::uint32_t kImm = 0x5ca7;
constexpr std::size_t kPeers = 4;

using Param = std::tuple<std::string, std::uint32_t>;  // provider, Domains per group

class GroupTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override { FABRIC_SKIP_IF_UNAVAILABLE(std::get<0>(GetParam())); }
  [[nodiscard]] std::uint32_t domains() const { return std::get<1>(GetParam()); }
  [[nodiscard]] EngineConfig config() const {
    EngineConfig c = engine_config(std::get<0>(GetParam()));
    c.domains_per_group = domains();
    return c;
  }

  void start_targets(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      targets_.push_back(std::make_unique<CountingTarget>(config(), kRegion, kImm));
      mirrors_.emplace_back(kRegion);
    }
  }
  ::testing::AssertionResult connect_all() {
    for (auto& t : targets_) {
      if (auto r = t->connect(); !r) return r;
    }
    return ::testing::AssertionSuccess();
  }
  // Waits for each target's expected count and compares its region with the mirror.
  void check_round(const std::vector<std::uint64_t>& expected, const char* what) {
    for (std::size_t i = 0; i < targets_.size(); ++i) {
      auto region = targets_[i]->round(expected[i]);
      ASSERT_TRUE(region.has_value()) << what << ": target " << i << " saw a wrong imm count";
      ASSERT_EQ(region->size(), kRegion);
      for (std::size_t b = 0; b < kRegion; ++b) {
        ASSERT_EQ((*region)[b], mirrors_[i][b]) << what << ": target " << i << " byte " << b;
      }
    }
  }
  void finish_all() {
    for (auto& t : targets_) EXPECT_TRUE(t->finish());
  }

  std::vector<std::unique_ptr<CountingTarget>> targets_;
  std::vector<std::vector<std::byte>> mirrors_;
};

TEST_P(GroupTest, ScatterAndBarrierRoundsLandExactlyWithDocumentedCounts) {
  start_targets(kPeers);
  ASSERT_ENGINE(engine, config());
  StopGuard guard(engine.get());
  ASSERT_TRUE(connect_all());
  std::vector<NetAddr> addrs;
  for (auto& t : targets_) addrs.push_back(t->dst().owner());
  auto all = engine->add_peer_group(addrs);
  ASSERT_OK(all);
  // Another group over a subset in another order: peer 3 and 1 are in both.
  auto some = engine->add_peer_group({addrs[3], addrs[1]});
  ASSERT_OK(some);

  std::vector<std::byte> src(kRegion);
  auto reg = engine->reg_mr(src.data(), src.size());
  ASSERT_OK(reg);
  const std::array<ScatterRouting, 3> routings = {ScatterRouting::peers(), ScatterRouting::bytes(),
                                                  ScatterRouting::pinned(domains() - 1)};
  constexpr int kRounds = 9;
  for (int round = 0; round < kRounds; ++round) {
    test::fill_random(src, 1000 + round);
    Scatter scatter;
    scatter.src = reg->handle;
    scatter.imm = kImm;
    scatter.routing = routings[round % routings.size()];
    if (round % 2 == 0) scatter.group = *all;
    std::vector<std::uint64_t> expected(kPeers, 0);
    for (std::size_t p = 0; p < kPeers; ++p) {
      // Awkward lengths (including 0 and lengths not divisible by K).
      const std::uint64_t length = (p == 2 && round % 3 == 0) ? 0 : 997 * (p + 1) + round;
      const std::uint64_t src_off = 8192 * p + 3 * round;
      const std::uint64_t dst_off = 12000 * p + 7 * round;
      scatter.slices.push_back({targets_[p]->dst(), length, src_off, dst_off});
      std::copy_n(src.begin() + static_cast<std::ptrdiff_t>(src_off), length,
                  mirrors_[p].begin() + static_cast<std::ptrdiff_t>(dst_off));
      expected[p] = scatter.routing.mode == ScatterRouting::Mode::shard_bytes ? domains() : 1;
    }
    auto scattered = std::make_shared<CompletionFlag>();
    ASSERT_OK(engine->submit_scatter(scatter, scattered));

    Barrier barrier;
    barrier.imm = kImm;
    if (round % 2 == 1) {
      barrier.group = *some;
      barrier.dsts = {targets_[3]->dst(), targets_[1]->dst()};
      expected[3] += 1;
      expected[1] += 1;
    } else {
      for (auto& t : targets_) barrier.dsts.push_back(t->dst());
      for (auto& e : expected) e += 1;
    }
    auto barriered = std::make_shared<CompletionFlag>();
    ASSERT_OK(engine->submit_barrier(barrier, barriered));
    ASSERT_OK(scattered->wait(kWait));
    ASSERT_OK(barriered->wait(kWait));
    check_round(expected, "scatter+barrier");
    if (HasFatalFailure()) return;
  }
  finish_all();
}

TEST_P(GroupTest, RequestsThatDoNotMatchTheirGroupAreRejected) {
  start_targets(2);
  ASSERT_ENGINE(engine, config());
  StopGuard guard(engine.get());
  ASSERT_TRUE(connect_all());
  auto group = engine->add_peer_group({targets_[0]->dst().owner(), targets_[1]->dst().owner()});
  ASSERT_OK(group);
  Barrier wrong_order;
  wrong_order.imm = kImm;
  wrong_order.group = *group;
  wrong_order.dsts = {targets_[1]->dst(), targets_[0]->dst()};
  EXPECT_EQ(engine->submit_barrier(wrong_order, OnDone{}).code(), Errc::invalid_argument);
  Barrier too_few = wrong_order;
  too_few.dsts = {targets_[0]->dst()};
  EXPECT_EQ(engine->submit_barrier(too_few, OnDone{}).code(), Errc::invalid_argument);
  Barrier unknown = too_few;
  unknown.group = PeerGroupHandle{999, 1};
  EXPECT_EQ(engine->submit_barrier(unknown, OnDone{}).code(), Errc::not_found);
  // Nothing of the rejected requests may arrive.
  check_round({0, 0}, "rejected barriers");
  finish_all();
}

TEST_P(GroupTest, PeersWithAnotherDomainCountAreRejectedAtFirstContact) {
  start_targets(1);
  EngineConfig mine = config();
  mine.domains_per_group = domains() == 1 ? 2 : 1;
  ASSERT_ENGINE(engine, mine);
  StopGuard guard(engine.get());
  ASSERT_TRUE(connect_all());
  const Status imm = engine->submit_imm(kImm, targets_[0]->dst(), OnDone{});
  EXPECT_EQ(imm.code(), Errc::invalid_argument);
  EXPECT_NE(imm.message().find("domains"), std::string::npos) << imm.to_string();
  EXPECT_EQ(engine->add_peer_group({targets_[0]->dst().owner()}).status().code(),
            Errc::invalid_argument);
  check_round({0}, "mismatched peer");
  finish_all();
}

TEST_P(GroupTest, SingleAndPagedWritesGiveTheDocumentedCountPerRouting) {
  start_targets(1);
  ASSERT_ENGINE(engine, config());
  StopGuard guard(engine.get());
  ASSERT_TRUE(connect_all());
  std::vector<std::byte> src(kRegion);
  test::fill_random(src, 77);
  auto reg = engine->reg_mr(src.data(), src.size());
  ASSERT_OK(reg);
  const MrDesc& dst = targets_[0]->dst();

  struct Case {
    WriteRouting routing;
    std::uint64_t length;
    std::uint64_t expected;
  };
  const std::vector<Case> cases = {
      {WriteRouting::all_domains(), 10007, domains()},
      {WriteRouting::shards(3), 5, 3},  // pieces of 2, 2, 1 bytes
      {WriteRouting::shards(5), 3, 5},  // two zero-length pieces still notify
      {WriteRouting::pinned(domains() - 1), 4099, 1},
  };
  std::uint64_t offset = 0;
  for (const Case& c : cases) {
    SingleWrite w;
    w.length = c.length;
    w.imm = kImm;
    w.src = {reg->handle, offset};
    w.dst = {dst, offset};
    w.routing = c.routing;
    auto flag = std::make_shared<CompletionFlag>();
    ASSERT_OK(engine->submit_single_write(w, flag));
    ASSERT_OK(flag->wait(kWait));
    std::copy_n(src.begin() + static_cast<std::ptrdiff_t>(offset), c.length,
                mirrors_[0].begin() + static_cast<std::ptrdiff_t>(offset));
    check_round({c.expected}, "single write");
    if (HasFatalFailure()) return;
    offset += c.length + 13;
  }

  PagedWrite paged;
  paged.page_length = 1000;
  paged.imm = kImm;
  paged.src = reg->handle;
  paged.dst = dst;
  paged.src_pages = {{6, 0, 5, 1, 3, 2, 4}, 1024, 100};
  paged.dst_pages = {{0, 6, 2, 4, 1, 3, 5}, 1100, 30000};
  auto flag = std::make_shared<CompletionFlag>();
  ASSERT_OK(engine->submit_paged_writes(paged, flag));
  ASSERT_OK(flag->wait(kWait));
  for (std::size_t i = 0; i < paged.src_pages.indices.size(); ++i) {
    std::copy_n(src.begin() + static_cast<std::ptrdiff_t>(100 + paged.src_pages.indices[i] * 1024),
                1000,
                mirrors_[0].begin() +
                    static_cast<std::ptrdiff_t>(30000 + paged.dst_pages.indices[i] * 1100));
  }
  check_round({7}, "paged write");
  finish_all();
}

std::string group_param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::get<0>(info.param) + "_k" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Providers, GroupTest,
                         ::testing::Combine(::testing::Values("shm", "tcp", "sockets", "udp", "verbs"),
                                            ::testing::Values(1u, 2u)),
                         group_param_name);

}  // namespace
}  // namespace fabric::conformance
