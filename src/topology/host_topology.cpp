#include "topology/host_topology.hpp"

#include <mutex>
#include <optional>

namespace fabric::topo {

const Result<Topology>& host_topology() {
  static std::once_flag once;
  static std::optional<Result<Topology>> topology;
  std::call_once(once, [] { topology.emplace(detect_topology(TopologyOptions{})); });
  return *topology;
}

}  // namespace fabric::topo
