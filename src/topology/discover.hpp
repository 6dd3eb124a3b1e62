#pragma once
// Reads GPUs, RDMA NICs, NUMA nodes and cores out of a loaded hwloc topology.

#include <hwloc.h>

#include <vector>

#include "fabric/topology.hpp"
#include "topology/placement.hpp"

namespace fabric::topo {

struct Discovery {
  std::vector<GpuInfo> gpus;
  std::vector<NicInfo> nics;
  std::vector<NumaInfo> numa;         // by os_index
  std::vector<DeviceSite> gpu_sites;  // parallel to gpus
  std::vector<DeviceSite> nic_sites;  // parallel to nics
  CpuSet cpus;
  std::size_t cores = 0;
};

[[nodiscard]] Discovery discover(hwloc_topology_t topology);

}  // namespace fabric::topo
