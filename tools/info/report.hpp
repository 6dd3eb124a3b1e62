#pragma once
// Everything fabric-info found, and its two renderings.

#include <cstddef>
#include <fabric/engine.hpp>
#include <fabric/topology.hpp>
#include <optional>
#include <vector>
#include <nlohmann/json.hpp>
#include <string>

#include "domain_choice.hpp"
#include "probes.hpp"

namespace info {

// --nics: the NIC each Domain would get (EngineConfig::nics resolved here,
// as TransferEngine::create would; nothing is opened).
struct NicChoice {
  std::string provider;
  std::vector<std::string> requested;
  fabric::Result<std::vector<fabric::DomainNic>> resolved =
      fabric::Status(fabric::Errc::not_found, "not probed");
};

struct Report {
  fabric::Result<fabric::Topology> topology = fabric::Status(fabric::Errc::not_found, "not probed");
  int max_nics_per_gpu = 4;
  std::size_t usable_cpus = 0;  // of this process, for the pinning default
  ProviderScan providers;
  VerbsScan verbs;
  CudaProbe cuda;
  std::optional<NicChoice> nics;
  // The device each Domain of each planned group would open (when the
  // topology was read).
  std::optional<DomainChoice> domains;
};

std::string text_report(const Report& report);
// Keys in the order of the text output.
nlohmann::ordered_json to_json(const Report& report);

}  // namespace info
