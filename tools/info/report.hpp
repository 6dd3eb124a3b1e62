#pragma once
// Everything fabric-info found, and its two renderings.

#include <cstddef>
#include <fabric/topology.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "probes.hpp"

namespace info {

struct Report {
  fabric::Result<fabric::Topology> topology = fabric::Status(fabric::Errc::not_found, "not probed");
  int max_nics_per_gpu = 4;
  std::size_t usable_cpus = 0;  // of this process, for the pinning default
  ProviderScan providers;
  VerbsScan verbs;
  CudaProbe cuda;
};

void print_text(const Report& report);
// Keys in the order of the text output.
nlohmann::ordered_json to_json(const Report& report);

}  // namespace info
