#include "topology/locality.hpp"

#include <algorithm>

namespace fabric::topo {

Proximity proximity(const Locality& a, const Locality& b) noexcept {
  if (a.host_bridge != 0 && a.host_bridge == b.host_bridge) {
    const auto [ia, ib] =
        std::mismatch(a.bridges.begin(), a.bridges.end(), b.bridges.begin(), b.bridges.end());
    const auto shared = static_cast<std::size_t>(ia - a.bridges.begin());
    if (shared > 0) return {Affinity::pcie_switch, shared};
    return {Affinity::pcie_root, 0};
  }
  if (a.numa >= 0 && a.numa == b.numa) return {Affinity::numa, 0};
  if (a.package >= 0 && a.package == b.package) return {Affinity::socket, 0};
  return {Affinity::system, 0};
}

}  // namespace fabric::topo

namespace fabric {

std::string_view to_string(Affinity affinity) noexcept {
  switch (affinity) {
    case Affinity::pcie_switch:
      return "pcie-switch";
    case Affinity::pcie_root:
      return "pcie-root";
    case Affinity::numa:
      return "numa";
    case Affinity::socket:
      return "socket";
    case Affinity::system:
      return "system";
  }
  return "?";
}

}  // namespace fabric
