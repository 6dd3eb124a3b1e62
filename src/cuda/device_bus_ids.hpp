#pragma once
// The PCI bus id of each CUDA device this process sees: how the engine finds a GPU of the
// topology plan (hwloc, PCI order) under any CUDA_VISIBLE_DEVICES (docs/topology.md, "Which GPU
// a group serves").

#include <string>
#include <vector>

#include "fabric/status.hpp"

namespace fabric::cuda {

// CUDA ordinal i's bus id at [i], as the driver prints it ("0000:53:00.0"). Errors: the driver
// cannot be loaded or has no device (unsupported), or lacks cuDeviceGetPCIBusId.
Result<std::vector<std::string>> visible_bus_ids();

}  // namespace fabric::cuda
