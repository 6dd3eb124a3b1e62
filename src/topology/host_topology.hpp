#pragma once
// This machine's topology plan, probed once per process: the machine does not change under a
// running process, and every engine (and each of its groups, when it picks NICs) asks for it.

#include "fabric/topology.hpp"

namespace fabric::topo {

// detect_topology() with default options, on first use; the same result afterwards.
[[nodiscard]] const Result<Topology>& host_topology();

}  // namespace fabric::topo
