#pragma once
// A fluid model of the NICs running a schedule: every write in flight is a
// flow from its trainer's NIC to its inference rank's NIC; rates are max-min
// fair under each NIC's capacity (both directions of a NIC are separate
// links); each trainer keeps at most window_bytes in flight, in its posting
// order; mesh groups run one after another, each closed by a barrier.

#include <cstdint>
#include <vector>

#include "fabric/weights/planner.hpp"
#include "fabric/weights/schedule.hpp"

namespace fabric::weights {

struct SimConfig {
  double nic_bytes_per_s = 50e9;
  std::uint64_t window_bytes = 256ull << 20;  // the executor's watermark
  double barrier_s = 0;                       // added after each mesh group
};

struct SimResult {
  double time_s = 0;
  std::vector<double> group_time_s;
  double bound_s = 0;
  double group_bound_s = 0;
  std::uint64_t events = 0;
  [[nodiscard]] double ratio() const noexcept { return bound_s > 0 ? time_s / bound_s : 0; }
};

[[nodiscard]] SimResult simulate(const Schedule& schedule, const SimConfig& config);

// Today's way, on the same NIC model: gather every trainer's shards to trainer
// rank 0, send the prepared model to inference rank 0, scatter from there.
struct BaselineEstimate {
  std::uint64_t gather_bytes = 0;     // into trainer rank 0's NIC
  std::uint64_t broadcast_bytes = 0;  // trainer rank 0 -> inference rank 0
  std::uint64_t scatter_bytes = 0;    // out of inference rank 0's NIC
  double time_s = 0;
};
[[nodiscard]] BaselineEstimate baseline_estimate(const PlanInput& input, const Schedule& schedule,
                                                 double nic_bytes_per_s);

}  // namespace fabric::weights
