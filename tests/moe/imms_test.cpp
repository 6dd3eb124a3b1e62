// A group's immediates come from the engines' reservations: the ranks agree on one block free on
// every rank's engine (whatever else each engine holds), a second group on the same engines gets
// another, and a block that cannot be found is an error naming the group.

#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>

#include "fabric/engine.hpp"
#include "fabric/moe/group.hpp"

namespace fabric::moe {
namespace {

using namespace std::chrono_literals;

// An all_gather among threads of this process, round by round.
class InProcessGather {
 public:
  explicit InProcessGather(std::uint32_t n) : n_(n), blobs_(n) {}
  AllGather for_rank(std::uint32_t rank) {
    return [this, rank](std::span<const std::byte> mine) -> Result<std::vector<std::vector<std::byte>>> {
      std::unique_lock lock(mutex_);
      blobs_[rank].assign(mine.begin(), mine.end());
      const std::uint64_t round = round_;
      if (++arrived_ == n_) {
        done_ = blobs_;
        arrived_ = 0;
        ++round_;
        changed_.notify_all();
        return done_;
      }
      if (!changed_.wait_for(lock, 30s, [&] { return round_ != round; }))
        return Status(Errc::timeout, "in-process all_gather: a rank did not arrive");
      return done_;
    };
  }

 private:
  std::uint32_t n_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::vector<std::byte>> blobs_, done_;
  std::uint32_t arrived_ = 0;
  std::uint64_t round_ = 0;
};

MoeConfig small(std::uint32_t world, std::uint32_t rank, const std::string& session) {
  MoeConfig c;
  c.world_size = world;
  c.rank = rank;
  c.num_experts = 2 * world;
  c.hidden = 8;
  c.top_k = 2;
  c.max_tokens_per_rank = 4;
  c.max_private_tokens = 1;
  c.timeout = 10s;
  c.session = session;
  return c;
}

std::vector<std::unique_ptr<MoeGroup>> create_groups(std::vector<std::unique_ptr<TransferEngine>>& engines,
                                                     const std::string& session) {
  const auto n = static_cast<std::uint32_t>(engines.size());
  InProcessGather gather(n);
  std::vector<std::future<Result<std::unique_ptr<MoeGroup>>>> made;
  for (std::uint32_t r = 0; r < n; ++r) {
    made.push_back(std::async(std::launch::async, [&, r] {
      return MoeGroup::create(*engines[r], small(n, r, session + std::to_string(r)), gather.for_rank(r));
    }));
  }
  std::vector<std::unique_ptr<MoeGroup>> groups;
  for (auto& m : made) {
    auto g = m.get();
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    if (g.ok()) groups.push_back(std::move(g).value());
  }
  return groups;
}

std::unique_ptr<TransferEngine> shm_engine() {
  EngineConfig ec;
  ec.provider = "shm";
  return TransferEngine::create(ec).value();
}

TEST(MoeImms, RanksWhoseEnginesHoldDifferentBlocksAgreeOnOneFreeOnAll) {
  std::vector<std::unique_ptr<TransferEngine>> engines;
  for (int i = 0; i < 3; ++i) engines.push_back(shm_engine());
  // Other workloads already hold different blocks on two of the engines.
  auto held1 = engines[1]->reserve_imms(500, "other on 1");
  auto held2 = engines[2]->reserve_imms(5000, "other on 2");
  ASSERT_TRUE(held1.ok() && held2.ok());
  auto groups = create_groups(engines, "imms-a-");
  ASSERT_EQ(groups.size(), 3u);
  const std::uint32_t first = groups[0]->imm(ImmKind::routes, 0);
  const std::uint32_t last = groups[0]->imm(ImmKind::leave, 2);
  EXPECT_EQ(last - first, kImmKinds * 3 - 1);
  for (const auto& g : groups) {
    EXPECT_EQ(g->imm(ImmKind::routes, 0), first);
    EXPECT_EQ(g->imm(ImmKind::leave, 2), last);
  }
  for (std::uint32_t v = first; v <= last; ++v) {
    EXPECT_FALSE(held1->contains(v) || held2->contains(v)) << v;
  }
  // A second group on the same engines: another block, disjoint from the first.
  auto second = create_groups(engines, "imms-b-");
  ASSERT_EQ(second.size(), 3u);
  const std::uint32_t first2 = second[0]->imm(ImmKind::routes, 0);
  EXPECT_TRUE(first2 > last || first2 + kImmKinds * 3 <= first) << first2;
  for (const auto& g : second) EXPECT_EQ(g->imm(ImmKind::routes, 0), first2);
  // Released with the groups: with the space above taken, the first block is free again on
  // every engine (reservations are next fit, so only then does it come back).
  groups.clear();
  for (auto& e : engines) {
    const std::uint32_t top = e->reserve_imms(1, "probe")->first();
    auto rest = e->reserve_imms_from(top, 0u - top, "rest");
    ASSERT_TRUE(rest.ok()) << rest.status().to_string();
    auto again = e->reserve_imms_from(first, kImmKinds * 3, "after");
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    EXPECT_EQ(again->first(), first);
  }
}

TEST(MoeImms, NoFreeBlockIsAnErrorNamingTheGroup) {
  std::vector<std::unique_ptr<TransferEngine>> engines;
  engines.push_back(shm_engine());
  auto hog = engines[0]->reserve_imms_from(kFirstReservableImm, 0u - kFirstReservableImm, "hog");
  ASSERT_TRUE(hog.ok()) << hog.status().to_string();
  InProcessGather gather(1);
  auto g = MoeGroup::create(*engines[0], small(1, 0, "imms-full"), gather.for_rank(0));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Errc::out_of_range);
  EXPECT_NE(g.status().message().find("moe.group#"), std::string::npos) << g.status().message();
}

}  // namespace
}  // namespace fabric::moe
