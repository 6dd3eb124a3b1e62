#include "moe_work.hpp"

#include <algorithm>

#include "../moe/ranks.hpp"
#include "../moe/scenario.hpp"

namespace fabric::workloads::test {

namespace {

moe::MoeConfig config_for(const Plan& plan, std::uint32_t world, std::uint32_t rank, const std::string& session) {
  moe::MoeConfig c;
  c.world_size = world;
  c.rank = rank;
  c.num_experts = 2 * world;
  c.hidden = 32;
  c.top_k = 2;
  c.max_tokens_per_rank = 8;
  c.max_private_tokens = 2;
  c.timeout = plan.moe_timeout;
  c.session = session;
  return c;
}

moe::test::Scenario scenario(const moe::MoeConfig& c) {
  moe::test::Scenario sc;
  sc.config = c;
  sc.routing = moe::test::Routing::uniform;
  sc.seed = 26;
  return sc;
}

}  // namespace

Result<std::unique_ptr<MoeWork>> MoeWork::create(TransferEngine& engine, const Plan& plan, std::uint32_t rank,
                                                 fabric::test::Channel& channel) {
  std::unique_ptr<MoeWork> w(new MoeWork(engine));
  const auto c = config_for(plan, kRanks, rank, "one-engine-" + std::to_string(::getpid()));
  auto g = moe::MoeGroup::create(engine, c, moe::test::relay_all_gather(channel));
  if (!g.ok()) return g.status();
  w->group_ = std::move(g).value();
  return w;
}

Outcome MoeWork::run(const Plan& plan, std::uint32_t rank, fabric::test::Channel& channel) {
  Outcome out;
  const auto& c = group_->config();
  const bool victim = static_cast<std::int32_t>(rank) == plan.victim;
  const std::uint32_t n = victim ? plan.moe_before_death : plan.moe_iterations;
  // The victim leaves without quiescing: the survivors' next iteration may be arriving already.
  auto f = moe::test::run_iterations(*group_, engine_, scenario(c), c, 0, n, -1, 0, !victim);
  if (plan.victim < 0 || victim) {
    if (f) out.fail("moe: " + f->text);
    else out.done = n;
    out.imms = group_->stats().imms_consumed;
    if (!victim) stray_ = group_->stray_immediates();
    return out;
  }
  if (!f) {
    out.fail("moe: the survivor finished without noticing the dead rank");
    return out;
  }
  const auto broken = group_->broken_ranks();
  if (std::find(broken.begin(), broken.end(), static_cast<std::uint32_t>(plan.victim)) == broken.end()) {
    out.fail("moe: the failure does not name the dead rank: " + f->text);
    return out;
  }
  out.failed = 1;
  out.fail_ms = f->ms_into_iteration;
  // Rebuild without it, on the same engine: the old group's immediates go back first.
  group_.reset();
  const std::uint32_t next_rank = rank - (static_cast<std::int32_t>(rank) > plan.victim ? 1 : 0);
  // No one dies in the rebuilt group: the healthy run's bound, not the one that spots the death
  // quickly (4 s starved a survivor's first iteration on a loaded 2-core machine).
  Plan healthy = plan;
  healthy.moe_timeout = Plan{}.moe_timeout;
  const auto c2 = config_for(healthy, kRanks - 1, next_rank, "one-engine-rebuilt-" + std::to_string(::getpid()));
  auto g = moe::MoeGroup::create(engine_, c2, moe::test::relay_all_gather(channel));
  if (!g.ok()) {
    out.fail("moe rebuild: " + g.status().to_string());
    return out;
  }
  group_ = std::move(g).value();
  auto after = moe::test::run_iterations(*group_, engine_, scenario(c2), c2, 1000, plan.moe_after_rebuild, -1, 0);
  if (after) out.fail("moe after rebuild: " + after->text);
  else out.done = plan.moe_after_rebuild;
  stray_ = group_->stray_immediates();
  return out;
}

}  // namespace fabric::workloads::test
