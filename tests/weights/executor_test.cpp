// The executor between real engines in one process (shm): 4 trainer engines,
// 2 inference engines, the small model's schedule. The inference arenas must
// equal the single-process reference byte for byte, and the version count
// must complete only when every trainer committed.

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "fabric/engine.hpp"
#include "fabric/weights/executor.hpp"
#include "fabric/weights/imms.hpp"
#include "reference.hpp"
#include "small_model.hpp"

namespace fabric::weights {
namespace {

using namespace std::chrono_literals;

struct Cluster {
  PlanInput in = testing::small_model();
  Schedule s;
  std::vector<std::unique_ptr<TransferEngine>> trainers, inference;
  std::vector<std::vector<std::byte>> arenas;
  std::vector<std::vector<std::byte>> barrier_words;
  ExecutorPeers peers;

  explicit Cluster(PlannerConfig pc = {}) {
    pc.max_chunk_bytes = 40 << 10;
    s = *plan(in, pc);
    EngineConfig ec;
    ec.provider = "shm";
    ec.request_timeout = 3000ms;
    for (int i = 0; i < 4; ++i) trainers.push_back(TransferEngine::create(ec).value());
    for (int i = 0; i < 2; ++i) inference.push_back(TransferEngine::create(ec).value());
    for (int r = 0; r < 2; ++r) {
      arenas.emplace_back(s.arena_bytes[r]);
      auto reg = inference[r]->reg_mr(arenas[r].data(), arenas[r].size());
      peers.inference_arenas.push_back(reg->desc);
    }
    for (int t = 0; t < 4; ++t) {
      barrier_words.emplace_back(64);
      auto reg = trainers[t]->reg_mr(barrier_words[t].data(), 64);
      peers.trainer_barriers.push_back(reg->desc);
    }
  }

  // One executor per trainer engine.
  std::vector<std::unique_ptr<Executor>> executors(std::chrono::milliseconds timeout, std::uint64_t watermark) {
    std::vector<std::unique_ptr<Executor>> ex;
    for (std::uint32_t t = 0; t < 4; ++t) {
      ExecutorConfig cfg;
      cfg.rank = t;
      cfg.watermark_bytes = watermark;
      cfg.timeout = timeout;
      auto e = Executor::create(*trainers[t], s, cfg, peers);
      EXPECT_TRUE(e.ok()) << e.status().to_string();
      ex.push_back(std::move(e).value());
    }
    return ex;
  }
};

// Runs one update on trainer rank t with whole-tensor views (what prepare's
// unshard leaves for FSDP parameters; experts as the rank's own shard).
Status run_update(Executor& ex, const PlanInput& in, const Globals& g, std::uint32_t t, std::uint64_t version,
                  std::uint32_t stop_after_group = ~0u) {
  if (auto st = ex.begin(version); !st.ok()) return st;
  const Schedule& s = ex.schedule();
  for (std::uint32_t group = 0; group < s.group_names.size(); ++group) {
    for (std::uint32_t ti = 0; ti < s.targets.size(); ++ti) {
      const auto& target = s.targets[ti];
      if (target.mesh_group != group) continue;
      std::vector<SourceView> views;
      for (const auto& name : target.sources) {
        for (const auto& p : in.trainer.params) {
          if (p.name != name) continue;
          Box full{Shape(p.shape.size(), 0), p.shape};
          std::int64_t off = 0;
          if (group == 1) {  // experts: this rank's two, EP-sharded, never unsharded
            full.lo[0] = 2 * t;
            full.hi[0] = 2 * t + 2;
            off = 2 * t * p.shape[1] * p.shape[2] * 2;
          }
          views.push_back({name, g.bytes.at(name).data() + off, p.dtype, full});
        }
      }
      if (auto st = ex.send_target(ti, views); !st.ok()) return st;
    }
    if (group == stop_after_group) return Status(Errc::cancelled, "stopped on purpose");
    if (auto st = ex.finish_group(group); !st.ok()) return st;
  }
  return ex.commit();
}

TEST(Executor, FourTrainersFillTwoInferenceRanksByteForByteOverSeveralVersions) {
  Cluster c;
  auto ex = c.executors(10000ms, 1 << 20);
  for (std::uint64_t v = 1; v <= 3; ++v) {
    auto g = make_globals(c.in, static_cast<int>(v));
    std::vector<std::shared_ptr<ImmCounter>> counters;
    for (int r = 0; r < 2; ++r) counters.push_back(*c.inference[r]->imm_counter(data_imm(v)));
    std::vector<std::future<Status>> runs;
    for (std::uint32_t t = 0; t < 4; ++t) {
      runs.push_back(std::async(std::launch::async, [&, t] { return run_update(*ex[t], c.in, g, t, v); }));
    }
    for (auto& r : runs) ASSERT_TRUE(r.get().ok());
    auto want = assemble(c.in, c.s, g);
    for (int r = 0; r < 2; ++r) {
      ASSERT_TRUE(counters[r]->wait(c.s.expected_imms[r], 10s).ok());
      EXPECT_EQ(counters[r]->value(), c.s.expected_imms[r]);
      EXPECT_TRUE(c.arenas[r] == want[r]) << "inference rank " << r << " version " << v;
      ASSERT_TRUE(c.inference[r]->release_imm_counter(data_imm(v)).ok());
    }
  }
  auto st = ex[0]->stats();
  EXPECT_GT(st.writes, 0u);
  EXPECT_LE(st.peak_staging_bytes, 1u << 20);
  EXPECT_FALSE(ex[0]->begin(3).ok());  // versions only grow
}

TEST(Executor, ReservedBlocksCarryEachRanksOwnValuesAndNothingElseArrives) {
  Cluster c;
  // Another workload's block first on inference rank 0, so the ranks' blocks differ.
  auto other = c.inference[0]->reserve_imms(1000, "another workload");
  ASSERT_TRUE(other.ok());
  std::vector<ImmReservation> held;
  for (auto& e : c.inference) {
    held.push_back(reserve_update_imms(*e).value());
    c.peers.inference_imms.push_back(block_of(held.back()));
  }
  EXPECT_NE(c.peers.inference_imms[0].first, c.peers.inference_imms[1].first);
  std::vector<ImmReservation> own;
  for (auto& e : c.trainers) {
    own.push_back(reserve_update_imms(*e).value());
    c.peers.trainer_imms.push_back(block_of(own.back()));
  }
  std::vector<std::unique_ptr<Executor>> ex;
  for (std::uint32_t t = 0; t < 4; ++t) {
    ExecutorConfig cfg;
    cfg.rank = t;
    cfg.timeout = 10000ms;
    cfg.watermark_bytes = 1 << 20;
    auto e = Executor::create(*c.trainers[t], c.s, cfg, c.peers, std::move(own[t]));
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    ex.push_back(std::move(e).value());
  }
  const std::uint64_t v = 1;
  auto g = make_globals(c.in, 5);
  std::vector<std::shared_ptr<ImmCounter>> counters;
  for (int r = 0; r < 2; ++r) {
    const std::uint32_t imm = data_imm(c.peers.inference_imms[r], v);
    ASSERT_TRUE(held[r].check(imm).ok());
    if (r == 0) EXPECT_FALSE(other->contains(imm));  // (blocks are per engine)
    counters.push_back(*c.inference[r]->imm_counter(imm));
  }
  std::vector<std::future<Status>> runs;
  for (std::uint32_t t = 0; t < 4; ++t) {
    runs.push_back(std::async(std::launch::async, [&, t] { return run_update(*ex[t], c.in, g, t, v); }));
  }
  for (auto& r : runs) {
    Status st = r.get();
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  auto want = assemble(c.in, c.s, g);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(counters[r]->wait(c.s.expected_imms[r], 10s).ok());
    EXPECT_TRUE(c.arenas[r] == want[r]) << "inference rank " << r;
    // Every immediate that reached the rank is one its block's counter took: none elsewhere.
    EXPECT_EQ(counters[r]->value(), c.s.expected_imms[r]);
    EXPECT_EQ(c.inference[r]->metrics().imms_received, c.s.expected_imms[r]);
  }
  // The trainers' barriers arrived in their own blocks, 3 per trainer per mesh group.
  for (std::uint32_t t = 0; t < 4; ++t) {
    EXPECT_EQ(c.trainers[t]->metrics().imms_received, 3u * c.s.group_names.size()) << "trainer " << t;
  }
}

TEST(Executor, UpdateBlocksOnOneEngineAreDisjointAndExhaustionNamesWeights) {
  EngineConfig ec;
  ec.provider = "shm";
  auto engine = TransferEngine::create(ec).value();
  auto a = reserve_update_imms(*engine);
  auto b = reserve_update_imms(*engine);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GE(b->first(), a->first() + kUpdateImms);
  // Everything above b taken: no room for a third.
  auto rest = engine->reserve_imms_from(b->first() + b->count(), 0u - (b->first() + b->count()), "rest");
  ASSERT_TRUE(rest.ok()) << rest.status().to_string();
  a->release();  // a's block is free again, and a third fits exactly there
  auto c = reserve_update_imms(*engine);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->first(), a->first());
  auto d = reserve_update_imms(*engine);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Errc::out_of_range);
  EXPECT_NE(d.status().message().find("weights"), std::string::npos) << d.status().message();
}

TEST(Executor, AMissingTrainerFailsTheUpdateOnEveryRankInBoundedTime) {
  Cluster c;
  auto ex = c.executors(1500ms, ExecutorConfig{}.watermark_bytes);
  auto g = make_globals(c.in, 9);
  std::vector<std::shared_ptr<ImmCounter>> counters;
  for (int r = 0; r < 2; ++r) counters.push_back(*c.inference[r]->imm_counter(data_imm(1)));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::future<Status>> runs;
  for (std::uint32_t t = 0; t < 4; ++t) {
    // Trainer 3 dies after preparing and writing its dense parameters.
    const std::uint32_t stop = t == 3 ? 0 : ~0u;
    runs.push_back(std::async(std::launch::async, [&, t, stop] { return run_update(*ex[t], c.in, g, t, 1, stop); }));
  }
  for (std::uint32_t t = 0; t < 3; ++t) {
    Status st = runs[t].get();
    EXPECT_EQ(st.code(), Errc::timeout) << st.to_string();
    EXPECT_NE(st.message().find("barrier after mesh group 0"), std::string::npos) << st.message();
  }
  EXPECT_EQ(runs[3].get().code(), Errc::cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  for (int r = 0; r < 2; ++r) {
    EXPECT_LT(counters[r]->value(), c.s.expected_imms[r]);  // version 1 never completes
  }
}

TEST(Executor, RefusesAViewThatLacksWhatTheChunkNeeds) {
  Cluster c;
  std::uint32_t norm = 0;
  while (c.s.targets[norm].name != "norm") ++norm;
  std::uint32_t sender = 0;
  for (const auto& op : c.s.writes) {
    if (c.s.images[c.s.chunks[op.chunk].image].target == norm) sender = op.trainer;
  }
  ExecutorConfig cfg;
  cfg.rank = sender;
  auto ex = Executor::create(*c.trainers[sender], c.s, cfg, c.peers).value();
  ASSERT_TRUE(ex->begin(1).ok());
  ASSERT_TRUE(ex->sends(norm));
  auto g = make_globals(c.in, 2);
  {
    const std::uint32_t ti = norm;
    Box half{{0}, {128}};  // the FSDP shard, not unsharded
    std::vector<SourceView> views{{"norm", g.bytes.at("norm").data(), DType::f32, half}};
    Status st = ex->send_target(ti, views);
    EXPECT_EQ(st.code(), Errc::invalid_argument);
    EXPECT_NE(st.message().find("view holds [0:128]"), std::string::npos) << st.message();
  }
}

TEST(Executor, RefusesAnArenaSmallerThanTheSchedule) {
  Cluster c;
  auto peers = c.peers;
  std::vector<std::byte> small(16);
  peers.inference_arenas[1] = c.inference[1]->reg_mr(small.data(), small.size())->desc;
  ExecutorConfig cfg;
  auto ex = Executor::create(*c.trainers[0], c.s, cfg, peers);
  ASSERT_FALSE(ex.ok());
  EXPECT_NE(ex.status().message().find("inference rank 1 registered 16 bytes"), std::string::npos);
}

}  // namespace
}  // namespace fabric::weights
