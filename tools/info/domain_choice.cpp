#include "domain_choice.hpp"

#include <algorithm>

#include "backends/nic_choice.hpp"

namespace info {

namespace {

// The engine's natural choice for these NICs: efa for EFAs, the verbs backend
// for other RDMA NICs, the engine's default (shm) without any.
void pick_for_topology(const fabric::Topology& t, fabric::EngineConfig& config) {
  if (t.nics.empty()) return;
  const bool efa = std::any_of(t.nics.begin(), t.nics.end(), [](const fabric::NicInfo& n) {
    return n.kind == fabric::NicKind::efa;
  });
  if (efa) {
    config.provider = "efa";
  } else {
    config.backend = fabric::Backend::verbs;
    config.provider = "verbs";
  }
}

}  // namespace

DomainChoice choose_domains(const fabric::Topology& topology, const DomainChoiceOptions& options) {
  DomainChoice out;
  fabric::EngineConfig& config = out.config;
  if (options.backend) config.backend = *options.backend;
  if (options.provider) {
    config.provider = *options.provider;
  } else if (config.backend == fabric::Backend::verbs) {
    config.provider = "verbs";
  } else if (!options.nics.empty()) {
    config.provider = "tcp";  // what --nics has always been resolved for
  } else if (!options.backend) {
    pick_for_topology(topology, config);
    out.picked = true;
  }
  config.nics = options.nics;
  if (!options.nics.empty()) {
    config.domains_per_group = static_cast<std::uint32_t>(options.nics.size());
  } else if (options.domains) {
    config.domains_per_group = static_cast<std::uint32_t>(*options.domains);
  } else {
    const std::size_t planned = topology.groups.empty() ? 0 : topology.groups.front().nics.size();
    config.domains_per_group = static_cast<std::uint32_t>(std::clamp<std::size_t>(
        planned, 1, fabric::NetAddr::kMaxDomains));
    out.picked = true;
  }
  std::optional<fabric::ProviderDevices> offered;
  if (options.live) offered = fabric::domain::provider_devices(config);
  for (const auto& group : topology.groups) {
    out.groups.push_back(fabric::plan_group_nics(topology, group, config, offered));
  }
  return out;
}

}  // namespace info
