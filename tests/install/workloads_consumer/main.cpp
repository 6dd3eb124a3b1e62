// Links the installed workload libraries and calls into each (tests/install/run.sh): a KV layout
// and its transfer plan, an MoE configuration check, a weights plan of an empty model. Each call
// needs its archive and fabric-lib's beneath it to resolve, at link and at run time.

#include <cstdio>

#include <fabric/kv/layout.hpp>
#include <fabric/kv/plan.hpp>
#include <fabric/moe/config.hpp>
#include <fabric/weights/planner.hpp>

int main() {
  auto shard = fabric::kv::shard_heads(4, 2, 1);
  if (!shard) return std::fprintf(stderr, "kv: %s\n", shard.status().to_string().c_str()), 1;
  const auto layout = fabric::kv::vllm_nhd({2, 16, 16, 4, *shard, 64, 2});
  auto runs = fabric::kv::plan_runs(layout, layout, {2, 4}, {0, 40});
  if (!runs || runs->empty()) {
    std::fprintf(stderr, "kv: no plan: %s\n", runs ? "empty" : runs.status().to_string().c_str());
    return 1;
  }
  fabric::moe::MoeConfig moe;
  moe.world_size = 2;
  moe.num_experts = 8;
  const fabric::Status checked = fabric::moe::validate(moe);
  auto schedule = fabric::weights::plan(fabric::weights::PlanInput{});
  std::printf("workloads: kv plan of %zu runs, moe config %s, weights plan %s\n", runs->size(),
              checked.ok() ? "valid" : checked.to_string().c_str(),
              schedule ? "made" : schedule.status().to_string().c_str());
  return 0;
}
