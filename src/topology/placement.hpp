#pragma once
// Which NICs and CPUs each DomainGroup gets: pure planning over localities,
// so it is testable without hwloc.

#include <vector>

#include "fabric/topology.hpp"
#include "topology/locality.hpp"

namespace fabric::topo {

struct DeviceSite {
  Locality locality;
  CpuSet
      local_cpus;  // CPUs hwloc places next to the device; fallback when its NUMA node is unknown
};

struct PlacementInput {
  std::vector<DeviceSite> gpus;
  std::vector<DeviceSite> nics;
  std::vector<NumaInfo> numa;  // sorted by os_index
  CpuSet all_cpus;
  int max_nics_per_gpu = 4;  // 1–4, checked by the caller
};

// One group per GPU (or one host group without GPUs). Every group gets the same
// number of NICs: min(max, NICs / GPUs), at least 1 when there is any NIC.
// NICs are handed out in rounds, one per group per round, each group taking
// its closest free NIC (deepest shared PCIe switch, then root complex, NUMA
// node, socket), so no NIC serves two groups unless NICs are fewer than
// groups; then the least-shared closest NICs are reused.
[[nodiscard]] std::vector<GroupPlan> plan_groups(const PlacementInput& input);

}  // namespace fabric::topo
