#pragma once
// Where a device hangs in the machine, reduced to what placement compares.

#include <cstdint>
#include <vector>

#include "fabric/topology.hpp"

namespace fabric::topo {

struct Locality {
  // Identity of the host bridge (root complex) above the device; 0 when none.
  std::uint64_t host_bridge = 0;
  // Identities of the PCI-to-PCI bridges from the host bridge down to the
  // device: root port, switch ports, … Two devices sharing a prefix share
  // those bridges; the longer the prefix, the closer they are.
  std::vector<std::uint64_t> bridges;
  int numa = -1;
  int package = -1;
};

// How close two devices are; compares "closer first".
struct Proximity {
  Affinity level = Affinity::system;
  // Bridges in common below the host bridge (pcie_switch only).
  std::size_t shared_bridges = 0;

  friend bool operator<(const Proximity& a, const Proximity& b) noexcept {
    if (a.level != b.level) return a.level < b.level;
    return a.shared_bridges > b.shared_bridges;
  }
  friend bool operator==(const Proximity&, const Proximity&) = default;
};

[[nodiscard]] Proximity proximity(const Locality& a, const Locality& b) noexcept;

}  // namespace fabric::topo
