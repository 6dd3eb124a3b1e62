#pragma once
// EngineConfig::nics resolved on this host: the address, interface or device
// each Domain of a group opens (docs/api.md, "NIC per Domain").

#include <string>
#include <vector>

#include "fabric/domain_nic.hpp"
#include "fabric/engine.hpp"

namespace fabric::domain {

// One IP address of one interface of this host (this network namespace).
struct HostAddress {
  std::string interface;
  std::string address;
  bool ipv4 = true;
};

// Every IPv4 and IPv6 address of every interface, in getifaddrs() order.
std::vector<HostAddress> host_addresses();

// One DomainNic per Domain; an error names the bad entry and lists what the
// host has instead.
Result<std::vector<DomainNic>> resolve_nics(const EngineConfig& config);

}  // namespace fabric::domain
