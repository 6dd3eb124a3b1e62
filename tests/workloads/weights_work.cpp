#include "weights_work.hpp"

#include <cstdio>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "../weights/reference.hpp"
#include "fabric/weights/imms.hpp"

namespace fabric::workloads::test {

namespace {

using Clock = std::chrono::steady_clock;
using weights::PlanInput;
using weights::Schedule;

Result<Schedule> schedule_for(std::uint32_t tp) {
  weights::PlannerConfig pc;
  pc.max_chunk_bytes = 8 << 10;  // several chunks per target
  return weights::plan(tiny_model(tp), pc);
}

// One version on an executor whose schedule has one trainer: whole tensors.
Status update(weights::Executor& ex, const PlanInput& in, std::uint64_t v) {
  if (auto st = ex.begin(v); !st.ok()) return st;
  const auto g = weights::make_globals(in, static_cast<int>(v));
  const Schedule& s = ex.schedule();
  for (std::uint32_t group = 0; group < s.group_names.size(); ++group) {
    for (std::uint32_t t = 0; t < s.targets.size(); ++t) {
      if (s.targets[t].mesh_group != group) continue;
      std::vector<weights::SourceView> views;
      for (const auto& p : in.trainer.params) {
        views.push_back({p.name, g.bytes.at(p.name).data(), p.dtype,
                         weights::Box{weights::Shape(p.shape.size(), 0), p.shape}});
      }
      if (auto st = ex.send_target(t, views); !st.ok()) return st;
    }
    if (auto st = ex.finish_group(group); !st.ok()) return st;
  }
  return ex.commit();
}

}  // namespace

PlanInput tiny_model(std::uint32_t tp) {
  const std::string json = fmt::format(R"json({{
  "trainer": {{
    "mesh": [["dp", 1]],
    "groups": [{{"name": "dense", "unshard": ["dp"]}}],
    "params": [
      {{"name": "a", "shape": [64, 96], "dtype": "bfloat16", "placements": ["S(0)"], "group": "dense"}},
      {{"name": "b", "shape": [96, 64], "dtype": "bfloat16", "placements": ["S(0)"], "group": "dense"}}
    ]
  }},
  "inference": {{
    "mesh": [["tp", {}]],
    "params": [
      {{"name": "a", "shape": [64, 96], "dtype": "bfloat16", "placements": ["S(0)"]}},
      {{"name": "b", "shape": [96, 64], "dtype": "bfloat16", "placements": ["S(1)"]}}
    ]
  }},
  "rules": [{{"target": "a", "sources": ["a"]}}, {{"target": "b", "sources": ["b"]}}]
}})json", tp);
  return *weights::parse_plan_input(json);
}

Result<std::unique_ptr<WeightsInference>> WeightsInference::create(TransferEngine& engine) {
  std::unique_ptr<WeightsInference> w(new WeightsInference(engine));
  auto two = schedule_for(2);
  if (!two.ok()) return two.status();
  auto one = schedule_for(1);
  if (!one.ok()) return one.status();
  // Large enough for either schedule (the survivor's TP 1 one after a death).
  const auto bytes = std::max({two->arena_bytes[0], two->arena_bytes[1], one->arena_bytes[0]});
  w->arena_.resize(bytes);
  auto reg = engine.reg_mr(w->arena_.data(), w->arena_.size());
  if (!reg.ok()) return reg.status();
  w->reg_ = *reg;
  auto block = weights::reserve_update_imms(engine);
  if (!block.ok()) return block.status();
  w->block_ = std::move(block).value();
  return w;
}

void WeightsInference::publish(Published& p) const {
  p.arena = reg_.desc.encode();
  p.weights_first = block_.first();
  p.weights_count = block_.count();
}

Outcome WeightsInference::version(const PlanInput& in, const Schedule& s, std::uint32_t index,
                                  std::uint64_t v, const Plan& plan,
                                  std::chrono::milliseconds bound, const MrDesc& acks,
                                  std::uint32_t ack_first, bool ack_now) {
  Outcome out;
  const std::uint32_t imm = weights::data_imm(weights::block_of(block_), v);
  auto counter = engine_.imm_counter(imm);
  if (!counter.ok()) {
    out.fail("counter: " + counter.status().to_string());
    return out;
  }
  const std::uint64_t expected = s.expected_imms[index];
  if (auto st = (*counter)->wait(expected, bound); !st.ok()) {
    out.fail(fmt::format("version {}: {} of {} immediates within the bound", v, (*counter)->value(), expected));
  } else if ((*counter)->value() != expected) {
    out.fail(fmt::format("version {}: {} immediates, the schedule makes {}", v, (*counter)->value(), expected));
  } else {
    const auto want = weights::assemble(in, s, weights::make_globals(in, static_cast<int>(v)))[index];
    if (std::memcmp(arena_.data(), want.data(), want.size()) != 0) {
      out.fail(fmt::format("version {}: arena differs from the reference", v));
    } else {
      out.imms += expected;
      ++out.done;
    }
  }
  (void)engine_.release_imm_counter(imm);
  if (!out.ok() || !ack_now) return out;
  if (auto st = ack(v, plan, acks, ack_first); !st.ok()) out.fail(st.to_string());
  return out;
}

Status WeightsInference::ack(std::uint64_t v, const Plan& plan, const MrDesc& acks, std::uint32_t ack_first) {
  auto flag = std::make_shared<CompletionFlag>();
  Status st = engine_.submit_imm(ack_first + static_cast<std::uint32_t>(v % kAckImms), acks, flag);
  if (st.ok()) st = flag->wait(plan.wait_bound);
  if (!st.ok()) return Status(st.code(), fmt::format("ack of version {}: {}", v, st.to_string()));
  return {};
}

Status WeightsInference::ack_last(const Plan& plan, const Published& trainer) {
  auto acks = MrDesc::decode(trainer.acks);
  if (!acks.ok()) return acks.status();
  return ack(1, plan, *acks, trainer.ack_first);
}

Outcome WeightsInference::run(const Plan& plan, std::uint32_t rank, const Published& trainer) {
  Outcome out;
  auto acks = MrDesc::decode(trainer.acks);
  if (!acks.ok()) {
    out.fail("ack descriptor: " + acks.status().to_string());
    return out;
  }
  const auto two = *schedule_for(2);
  const auto one = *schedule_for(1);
  const auto in2 = tiny_model(2), in1 = tiny_model(1);
  const bool victim = static_cast<std::int32_t>(rank) == plan.victim;
  const std::uint64_t before = plan.victim >= 0 ? 1 : plan.weights_versions;
  auto add = [&out](const Outcome& o) {
    out.done += o.done;
    out.imms += o.imms;
    if (!o.ok()) out.fail(o.error);
  };
  for (std::uint64_t v = 1; v <= before && out.ok(); ++v)
    add(version(in2, two, inference_index(rank), v, plan, plan.wait_bound, *acks, trainer.ack_first,
                !victim));
  if (plan.victim < 0 || victim) return out;
  // The survivor alone, on the TP 1 schedule (the failed versions' arrivals are not counted).
  out.imms = 0;  // (not comparable with the engine's total once a version failed)
  // The first version after the death comes only once the trainer's update to the dead rank has
  // failed, which the executor bounds by wait_bound: this rank waits that long more.
  for (std::uint64_t v = kAfterDeath; v < kAfterDeath + plan.weights_versions - 1 && out.ok(); ++v) {
    const auto bound = v == kAfterDeath ? 2 * plan.wait_bound : plan.wait_bound;
    add(version(in1, one, 0, v, plan, bound, *acks, trainer.ack_first, true));
  }
  return out;
}

Result<std::unique_ptr<WeightsTrainer>> WeightsTrainer::create(TransferEngine& engine) {
  std::unique_ptr<WeightsTrainer> w(new WeightsTrainer(engine));
  w->ack_memory_.resize(64);
  auto reg = engine.reg_mr(w->ack_memory_.data(), w->ack_memory_.size());
  if (!reg.ok()) return reg.status();
  w->ack_reg_ = *reg;
  auto acks = engine.reserve_imms(kAckImms, "test.weights-acks");
  if (!acks.ok()) return acks.status();
  w->acks_ = std::move(acks).value();
  return w;
}

void WeightsTrainer::publish(Published& p) const {
  p.acks = ack_reg_.desc.encode();
  p.ack_first = acks_.first();
}

Outcome WeightsTrainer::run(const Plan& plan, const std::vector<Published>& all) {
  Outcome out;
  std::vector<MrDesc> arenas;
  std::vector<weights::ImmBlock> blocks;
  for (std::uint32_t r = 1; r < kRanks; ++r) {
    auto d = MrDesc::decode(all[r].arena);
    if (!d.ok()) {
      out.fail("arena descriptor: " + d.status().to_string());
      return out;
    }
    arenas.push_back(*d);
    blocks.push_back({all[r].weights_first, all[r].weights_count});
  }
  weights::ExecutorConfig cfg;
  cfg.timeout = plan.wait_bound;
  // Waits for `n` acknowledgements of version v.
  auto acked = [&](std::uint64_t v, std::uint64_t n) -> Status {
    const std::uint32_t imm = acks_.first() + static_cast<std::uint32_t>(v % kAckImms);
    auto c = engine_.imm_counter(imm);
    if (!c.ok()) return c.status();
    Status st = (*c)->wait_and_consume(n, plan.wait_bound);
    (void)engine_.release_imm_counter(imm);
    if (st.ok()) out.imms += n;
    return st;
  };
  {
    auto ex = weights::Executor::create(engine_, *schedule_for(2), cfg,
                                        weights::ExecutorPeers{arenas, {}, blocks, {}});
    if (!ex.ok()) {
      out.fail("executor: " + ex.status().to_string());
      return out;
    }
    const auto in = tiny_model(2);
    const std::uint64_t before = plan.victim >= 0 ? 1 : plan.weights_versions;
    for (std::uint64_t v = 1; v <= before && out.ok(); ++v) {
      if (auto st = update(**ex, in, v); !st.ok()) out.fail(fmt::format("version {}: {}", v, st.to_string()));
      else if (auto a = acked(v, 2); !a.ok()) out.fail(fmt::format("acks of version {}: {}", v, a.to_string()));
      else ++out.done;
    }
    if (plan.victim < 0 || !out.ok()) return out;
    // The victim dies as soon as it acknowledged version 1: updates to it fail from then on,
    // each within the executor's bound (one that succeeded reached it still alive).
    for (std::uint64_t v = 2; v < kAfterDeath; ++v) {
      const auto t0 = Clock::now();
      Status st = update(**ex, in, v);
      if (!st.ok()) {
        ++out.failed;
        out.fail_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
        break;
      }
    }
    if (out.failed == 0) {
      out.fail("every update reached the dead inference rank");
      return out;
    }
  }
  // The survivor alone: inference rank 1 (process 2) on a TP 1 schedule.
  auto ex = weights::Executor::create(engine_, *schedule_for(1), cfg,
                                      weights::ExecutorPeers{{arenas[1]}, {}, {blocks[1]}, {}});
  if (!ex.ok()) {
    out.fail("survivor executor: " + ex.status().to_string());
    return out;
  }
  const auto in = tiny_model(1);
  for (std::uint64_t v = kAfterDeath; v < kAfterDeath + plan.weights_versions - 1 && out.ok(); ++v) {
    if (auto st = update(**ex, in, v); !st.ok()) out.fail(fmt::format("version {}: {}", v, st.to_string()));
    else if (auto a = acked(v, 1); !a.ok()) out.fail(fmt::format("acks of version {}: {}", v, a.to_string()));
    else ++out.done;
  }
  return out;
}

}  // namespace fabric::workloads::test
