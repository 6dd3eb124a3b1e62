// detect_topology: hwloc discovery, then group planning.

#include <fmt/format.h>

#include "common/log.hpp"
#include "fabric/topology.hpp"
#include "topology/discover.hpp"
#include "topology/hwloc_topology.hpp"
#include "topology/placement.hpp"

namespace fabric {

Result<Topology> detect_topology(const TopologyOptions& options) {
  if (options.max_nics_per_gpu < 1 || options.max_nics_per_gpu > 4) {
    return Status(
        Errc::invalid_argument,
        fmt::format("max_nics_per_gpu is {}; a group holds 1 to 4 NICs", options.max_nics_per_gpu));
  }
  auto loaded = options.xml_path ? topo::HwlocTopology::load_xml_file(*options.xml_path)
                                 : topo::HwlocTopology::load_system();
  if (!loaded) return loaded.status();

  topo::Discovery found = topo::discover(loaded->get());
  topo::PlacementInput input{std::move(found.gpu_sites), std::move(found.nic_sites), found.numa,
                             found.cpus, options.max_nics_per_gpu};

  Topology topology;
  topology.source = options.xml_path ? *options.xml_path : "this machine";
  topology.groups = topo::plan_groups(input);
  topology.gpus = std::move(found.gpus);
  topology.nics = std::move(found.nics);
  topology.numa = std::move(found.numa);
  topology.cpus = std::move(found.cpus);
  topology.cores = found.cores;
  log::debug("topology of {}: {} GPUs, {} RDMA NICs, {} NUMA nodes, {} cores, {} groups",
             topology.source, topology.gpus.size(), topology.nics.size(), topology.numa.size(),
             topology.cores, topology.groups.size());
  return topology;
}

}  // namespace fabric
