#pragma once
// EngineConfig::nics resolved on this host: the address, interface or device
// each Domain of a group opens (docs/api.md, "NIC per Domain").

#include <optional>
#include <string>
#include <vector>

#include "fabric/domain_nic.hpp"
#include "fabric/engine.hpp"
#include "fabric/nic_plan.hpp"

namespace fabric::domain {

// One IP address of one interface of this host (this network namespace).
struct HostAddress {
  std::string interface;
  std::string address;
  bool ipv4 = true;
};

// Every IPv4 and IPv6 address of every interface, in getifaddrs() order.
std::vector<HostAddress> host_addresses();

// The devices the configured provider (or the verbs backend) offers here, for
// plan_group_nics(); nothing is opened.
std::optional<ProviderDevices> provider_devices(const EngineConfig& config);

// One DomainNic per Domain of group `group` (config.nics are that group's
// entries); an error names the bad entry and lists what the host has instead.
// With nics empty, providers that open named devices get that group's NICs
// from the topology plan (plan_group_nics).
Result<std::vector<DomainNic>> resolve_nics(const EngineConfig& config, std::size_t group = 0);

}  // namespace fabric::domain
