#pragma once
// What each Domain of every planned group would open (plan_group_nics), for
// fabric-info: the same choice TransferEngine::create makes for its group.

#include <fabric/nic_plan.hpp>
#include <optional>
#include <string>
#include <vector>

namespace info {

struct DomainChoiceOptions {
  std::optional<std::string> provider;  // unset: picked from the topology's NICs
  std::optional<fabric::Backend> backend;
  std::optional<int> domains;  // unset: the plan's NICs per group (at least 1)
  std::vector<std::string> nics;  // EngineConfig::nics, when given
  // The topology is this host's: only devices its provider lists are chosen.
  bool live = false;
};

struct DomainChoice {
  fabric::EngineConfig config;  // backend, provider, domains_per_group, nics as used
  bool picked = false;          // provider or count picked by fabric-info, not given
  std::vector<fabric::Result<fabric::GroupNics>> groups;  // one per Topology::groups entry
};

DomainChoice choose_domains(const fabric::Topology& topology, const DomainChoiceOptions& options);

}  // namespace info
