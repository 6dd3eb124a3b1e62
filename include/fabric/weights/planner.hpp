#pragma once
// The planner: from trainer and inference metadata and the name map, a
// deterministic static schedule (schedule.hpp). Bad metadata is refused here,
// with a message naming the parameter, before anything is sent.

#include <cstdint>
#include <string_view>
#include <vector>

#include "fabric/status.hpp"
#include "fabric/weights/metadata.hpp"
#include "fabric/weights/schedule.hpp"

namespace fabric::weights {

struct PlannerConfig {
  // Largest chunk one WRITE carries: smaller balances NICs more finely, larger
  // posts fewer writes. The executor's watermark must hold at least one.
  std::uint64_t max_chunk_bytes = 32ull << 20;
  std::uint32_t num_domains = 1;
  double nic_bytes_per_s = 50e9;  // 400 Gbit/s per rank, for the prediction
  // Arena entries start at multiples of this.
  std::uint64_t arena_alignment = 256;
};

struct PlanInput {
  TrainerLayout trainer;
  InferenceLayout inference;
  std::vector<NameRule> rules;
};

[[nodiscard]] Result<Schedule> plan(const PlanInput& input, const PlannerConfig& config = {});

// The metadata as JSON (docs/weights.md has the format); Python builds it.
[[nodiscard]] Result<PlanInput> parse_plan_input(std::string_view json);
[[nodiscard]] Result<PlannerConfig> parse_planner_config(std::string_view json);

// Recomputes the bytes bound and fills schedule.prediction's byte fields.
void compute_bound(Schedule& schedule, double nic_bytes_per_s);

}  // namespace fabric::weights
