#include "topology/placement.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace fabric::topo {

namespace {

const NumaInfo* find_numa(const std::vector<NumaInfo>& numa, int os_index) {
  for (const auto& node : numa) {
    if (node.os_index == os_index) return &node;
  }
  return nullptr;
}

// The CPUs of the device's NUMA node; what hwloc saw next to it when the node
// has no CPUs of its own (GPU or CXL memory nodes) or is unknown.
CpuSet group_cpus(const PlacementInput& input, int numa, const CpuSet& local) {
  if (const NumaInfo* node = find_numa(input.numa, numa); node && !node->cpus.empty()) {
    return node->cpus;
  }
  return local.empty() ? input.all_cpus : local;
}

std::size_t nics_per_group(const PlacementInput& input, std::size_t groups) {
  if (input.nics.empty() || groups == 0) return 0;
  const std::size_t fair = input.nics.size() / groups;
  return std::clamp<std::size_t>(fair, 1, static_cast<std::size_t>(input.max_nics_per_gpu));
}

void assign_gpu_nics(const PlacementInput& input, std::vector<GroupPlan>& groups) {
  const std::size_t want = nics_per_group(input, groups.size());
  const std::size_t ngpu = input.gpus.size();
  const std::size_t nnic = input.nics.size();
  std::vector<int> users(nnic, 0);

  struct Edge {
    Proximity proximity;
    std::size_t gpu;
    std::size_t nic;
  };
  std::vector<Edge> edges;
  edges.reserve(ngpu * nnic);
  for (std::size_t g = 0; g < ngpu; ++g) {
    for (std::size_t n = 0; n < nnic; ++n) {
      edges.push_back({proximity(input.gpus[g].locality, input.nics[n].locality), g, n});
    }
  }
  std::stable_sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
    return std::tie(a.proximity, a.gpu, a.nic) < std::tie(b.proximity, b.gpu, b.nic);
  });

  // Rounds of one NIC per group, so that an early GPU cannot take every NIC
  // of a shared switch or node before the others had their first.
  for (std::size_t round = 0; round < want; ++round) {
    for (const Edge& e : edges) {
      if (users[e.nic] == 0 && groups[e.gpu].nics.size() == round) {
        groups[e.gpu].nics.push_back({static_cast<int>(e.nic), e.proximity.level});
        users[e.nic] = 1;
      }
    }
  }

  // Fewer free NICs than slots (NICs fewer than GPUs): share, least-used first.
  for (std::size_t g = 0; g < ngpu; ++g) {
    while (groups[g].nics.size() < want) {
      const Edge* best = nullptr;
      for (const Edge& e : edges) {
        if (e.gpu != g) continue;
        const bool taken =
            std::any_of(groups[g].nics.begin(), groups[g].nics.end(),
                        [&](const NicAssignment& a) { return a.nic == static_cast<int>(e.nic); });
        if (taken) continue;
        if (best == nullptr || users[e.nic] < users[best->nic]) best = &e;
      }
      if (best == nullptr) break;
      groups[g].nics.push_back({static_cast<int>(best->nic), best->proximity.level});
      ++users[best->nic];
    }
  }
}

GroupPlan host_group(const PlacementInput& input) {
  GroupPlan group;
  const NumaInfo* home = nullptr;
  for (const auto& node : input.numa) {
    if (!node.cpus.empty()) {
      home = &node;
      break;
    }
  }
  Locality here;
  if (home != nullptr) {
    group.numa = home->os_index;
    here.numa = home->os_index;
    here.package = home->package;
  }
  group.cpus = group_cpus(input, group.numa, {});
  const std::size_t want = nics_per_group(input, 1);
  std::vector<NicAssignment> near;
  std::vector<NicAssignment> far;
  for (std::size_t n = 0; n < input.nics.size(); ++n) {
    const Affinity level = proximity(here, input.nics[n].locality).level;
    (level == Affinity::numa ? near : far).push_back({static_cast<int>(n), level});
  }
  // NICs of the home node first; the others only when it has none.
  const auto& pool = near.empty() ? far : near;
  group.nics.assign(pool.begin(),
                    pool.begin() + static_cast<std::ptrdiff_t>(std::min(want, pool.size())));
  return group;
}

// One core per group, taken from the top of its node: core 0 and its
// neighbours are where the kernel, interrupts and the application's main
// thread usually run. Groups share cores only once their node runs out.
void assign_cores(const PlacementInput& input, std::vector<GroupPlan>& groups) {
  std::map<int, std::size_t> taken;
  for (auto& group : groups) {
    std::vector<CpuSet> cores;
    if (const NumaInfo* node = find_numa(input.numa, group.numa); node && !node->cores.empty()) {
      cores = node->cores;
    } else {
      for (int cpu : group.cpus.cpus) cores.push_back(CpuSet{{cpu}});
    }
    if (cores.empty()) continue;
    const std::size_t k = taken[group.numa]++;
    group.core = cores[cores.size() - 1 - (k % cores.size())];
  }
}

}  // namespace

std::vector<GroupPlan> plan_groups(const PlacementInput& input) {
  std::vector<GroupPlan> groups;
  if (input.gpus.empty()) {
    groups.push_back(host_group(input));
  } else {
    for (std::size_t g = 0; g < input.gpus.size(); ++g) {
      GroupPlan group;
      group.gpu = static_cast<int>(g);
      group.numa = input.gpus[g].locality.numa;
      group.cpus = group_cpus(input, group.numa, input.gpus[g].local_cpus);
      groups.push_back(std::move(group));
    }
    assign_gpu_nics(input, groups);
  }
  assign_cores(input, groups);
  return groups;
}

}  // namespace fabric::topo
