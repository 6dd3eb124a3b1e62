#pragma once
// Which device each Domain of a group opens when EngineConfig::nics is empty:
// the NICs the topology plan gives that group, named the way the provider
// names them. Pure: nothing is probed or opened (docs/api.md, "NIC per Domain").

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/domain_nic.hpp"
#include "fabric/engine.hpp"
#include "fabric/topology.hpp"

namespace fabric {

// Where the devices of a group came from.
enum class NicSource : std::uint8_t {
  configured,        // EngineConfig::nics, or VerbsConfig::device on the verbs backend
  plan,              // the topology plan's NICs of the group
  provider_default,  // bind_address (IP providers), else the provider's own default device
};
[[nodiscard]] std::string_view to_string(NicSource source) noexcept;

// The devices a provider offers on this host, as it names them: the
// domain_attr->name of its fi_getinfo entries, or the verbs devices with an
// active port. Only these are chosen when given.
struct ProviderDevices {
  // The libfabric provider string as resolved ("efa" for provider "auto" on
  // an EFA host); "verbs" for the verbs backend.
  std::string provider;
  std::vector<std::string> names;
};

// What one group gets: where its worker runs and what each Domain opens.
struct GroupNics {
  int gpu = -1;   // index into Topology::gpus; -1 for a host group
  int numa = -1;  // the group's NUMA node
  CpuSet cpus;    // the CPUs of that node
  NicSource source = NicSource::provider_default;
  std::vector<DomainNic> domains;  // Domain i at [i]
  // Why the plan was not used, or how its NICs were shared; empty otherwise.
  std::string note;
};

// The provider's name for a topology NIC: EFA "rdmap79s0" is the libfabric
// domain "rdmap79s0-rdm"; a verbs device keeps its name. An EFA without a
// loaded driver ("pci:0000:4f:00.0") gets the name the driver would give it
// ("rdmap79s0-rdm"). Empty when this backend/provider names no devices after
// NICs (IP providers, shm) or the name cannot be derived.
[[nodiscard]] std::string provider_device_name(const NicInfo& nic, Backend backend,
                                               std::string_view provider);

// The choice for `group` (an entry of topology.groups) under `config`:
//  - EngineConfig::nics given: those entries, as given (source configured;
//    resolve_domain_nics() then checks them against this host);
//  - else, for providers that open named devices (efa, the verbs backend
//    without VerbsConfig::device, or any provider in `offered` that lists
//    a device named after a plan NIC): Domain i opens the plan's NIC
//    i mod n, n = the group's usable NICs, nearest first. Fewer NICs than
//    Domains is not an error: NICs are shared round-robin and `note` says so
//    (the same as the verbs backend's own "device i mod count" default);
//  - else (IP providers, shm, a plan without NICs): the provider default.
// `offered` (when known) restricts the plan to devices the provider lists;
// without it, names are derived from the topology alone (fixtures).
// invalid_argument when nics has the wrong length or domains_per_group is
// outside 1..NetAddr::kMaxDomains.
Result<GroupNics> plan_group_nics(const Topology& topology, const GroupPlan& group,
                                  const EngineConfig& config,
                                  const std::optional<ProviderDevices>& offered = std::nullopt);

}  // namespace fabric
