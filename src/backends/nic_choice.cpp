#include "backends/nic_choice.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <optional>

#include "common/log.hpp"
#include "fabric/backends.hpp"
#include "fabric/nic_plan.hpp"
#include "fabric/topology.hpp"
#include "libfabric/fi_provider.hpp"
#include "topology/host_topology.hpp"

namespace fabric {

std::string DomainNic::to_string() const {
  std::string s;
  if (!interface.empty()) s = interface;
  if (!address.empty()) s += (s.empty() ? "" : " ") + address;
  if (!device.empty() && device != interface) {
    s += s.empty() ? device : fmt::format(" (device {})", device);
  }
  if (s.empty()) s = "provider default";
  if (!requested.empty() && requested != interface && requested != address &&
      requested != device) {
    s += fmt::format(" for \"{}\"", requested);
  }
  return s;
}

}  // namespace fabric

namespace fabric::domain {

namespace {

bool is_ip_literal(const std::string& text) {
  in6_addr buf{};
  return inet_pton(AF_INET, text.c_str(), &buf) == 1 ||
         inet_pton(AF_INET6, text.c_str(), &buf) == 1;
}

std::string list_for_error(const std::vector<HostAddress>& all) {
  std::string s;
  for (const auto& a : all) {
    s += fmt::format("{}{} {}", s.empty() ? "" : ", ", a.interface, a.address);
  }
  return s.empty() ? "none" : s;
}

std::vector<std::string> interface_names() {
  std::vector<std::string> names;
  if (struct if_nameindex* list = ::if_nameindex()) {
    for (struct if_nameindex* p = list; p->if_index != 0; ++p) names.emplace_back(p->if_name);
    if_freenameindex(list);
  }
  return names;
}

// An address or an interface of this host as an IP endpoint; nullopt when
// the entry is neither (then it may be a device name).
Result<std::optional<DomainNic>> as_ip_nic(std::size_t i, const std::string& entry,
                                           const std::vector<HostAddress>& all) {
  DomainNic nic;
  nic.requested = entry;
  if (is_ip_literal(entry)) {
    auto it = std::find_if(all.begin(), all.end(),
                           [&](const HostAddress& a) { return a.address == entry; });
    if (it == all.end()) {
      return Status(Errc::invalid_argument,
                    fmt::format("EngineConfig::nics[{}] = \"{}\" is not an address of this "
                                "host (addresses here: {})",
                                i, entry, list_for_error(all)));
    }
    nic.interface = it->interface;
    nic.address = entry;
    return std::optional<DomainNic>(nic);
  }
  const auto names = interface_names();
  if (std::find(names.begin(), names.end(), entry) == names.end()) {
    return std::optional<DomainNic>();
  }
  // IPv4 first: the address a peer on the same rail reaches most simply.
  std::optional<HostAddress> pick;
  for (const auto& a : all) {
    if (a.interface != entry) continue;
    if (!pick || (a.ipv4 && !pick->ipv4)) pick = a;
  }
  if (!pick) {
    return Status(Errc::invalid_argument,
                  fmt::format("EngineConfig::nics[{}] = \"{}\": that interface has no IP "
                              "address (addresses here: {})",
                              i, entry, list_for_error(all)));
  }
  nic.interface = entry;
  nic.address = pick->address;
  return std::optional<DomainNic>(nic);
}

// Group `group`'s plan (Topology::groups[group], the group whose NUMA node its
// worker is pinned to) as devices of this provider; `fallback` (the provider
// default) when the plan gives this group none, or cannot be made here.
Result<std::vector<DomainNic>> from_topology_plan(const EngineConfig& config,
                                                  std::vector<DomainNic> fallback,
                                                  std::size_t group) {
  const Result<Topology>& topology = topo::host_topology();
  if (!topology || topology->groups.size() <= group) {
    log::info("NIC choice: provider default ({})",
              topology ? fmt::format("no group {} planned", group)
                       : topology.status().to_string());
    return fallback;
  }
  auto choice = plan_group_nics(*topology, topology->groups[group], config,
                                provider_devices(config));
  if (!choice) return choice.status();
  if (!choice->note.empty()) log::info("NIC choice: {}", choice->note);
  if (choice->source != NicSource::plan) return fallback;
  return std::move(choice->domains);
}

}  // namespace

std::optional<ProviderDevices> provider_devices(const EngineConfig& config) {
  ProviderDevices out;
  if (config.backend == Backend::verbs) {
    out.provider = "verbs";
    auto ports = list_verbs_ports();
    if (!ports) return out;
    for (const auto& p : *ports) {
      if (!p.active) continue;
      if (std::find(out.names.begin(), out.names.end(), p.device) == out.names.end()) {
        out.names.push_back(p.device);
      }
    }
    return out;
  }
  auto domains = ofi::list_domains(config.provider);
  out.provider = std::move(domains.provider);
  out.names = std::move(domains.names);
  return out;
}

std::vector<HostAddress> host_addresses() {
  std::vector<HostAddress> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* p = list; p != nullptr; p = p->ifa_next) {
    if (p->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (p->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(p->ifa_addr)->sin_addr, text,
                sizeof text);
      out.push_back({p->ifa_name, text, true});
    } else if (p->ifa_addr->sa_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(p->ifa_addr)->sin6_addr, text,
                sizeof text);
      out.push_back({p->ifa_name, text, false});
    }
  }
  freeifaddrs(list);
  return out;
}

Result<std::vector<DomainNic>> resolve_nics(const EngineConfig& config, std::size_t group) {
  const std::size_t k = config.domains_per_group;
  if (!config.nics.empty() && config.nics.size() != k) {
    return Status(Errc::invalid_argument,
                  fmt::format("EngineConfig::nics names {} NICs but domains_per_group is {}: "
                              "give one per Domain",
                              config.nics.size(), k));
  }
  std::vector<DomainNic> out(k);
  if (config.backend == Backend::verbs) {
    for (std::size_t i = 0; i < k; ++i) {
      out[i].requested = config.nics.empty() ? "" : config.nics[i];
      out[i].device = config.nics.empty() ? config.verbs.device : config.nics[i];
    }
    if (config.nics.empty() && config.verbs.device.empty()) {
      return from_topology_plan(config, std::move(out), group);
    }
    return out;
  }
  // "auto" is known only once opened: entries are then taken by their form.
  const std::string prov = ofi::provider_string(config.provider);
  const bool ip = ofi::is_ip_provider(prov);
  const bool by_form = config.provider == "auto";
  const auto all = host_addresses();
  if (config.nics.empty()) {
    if (ip) {
      for (auto& nic : out) {
        nic.address = config.bind_address;
        for (const auto& a : all) {
          if (a.address == config.bind_address) nic.interface = a.interface;
        }
      }
      return out;
    }
    // shm has one domain of its own; every other provider may name NICs.
    if (prov == "shm") return out;
    return from_topology_plan(config, std::move(out), group);
  }
  for (std::size_t i = 0; i < k; ++i) {
    const std::string& entry = config.nics[i];
    if (entry.empty()) {
      return Status(Errc::invalid_argument, fmt::format("EngineConfig::nics[{}] is empty", i));
    }
    if (!ip && !by_form) {
      out[i].requested = entry;
      out[i].device = entry;
      continue;
    }
    auto as_ip = as_ip_nic(i, entry, all);
    if (!as_ip) return as_ip.status();
    if (as_ip.value()) {
      out[i] = *as_ip.value();
      continue;
    }
    if (ip) {
      std::string names;
      for (const auto& n : interface_names()) names += (names.empty() ? "" : ", ") + n;
      return Status(Errc::invalid_argument,
                    fmt::format("EngineConfig::nics[{}] = \"{}\" is neither a network interface "
                                "nor an address of this host (interfaces here: {}); provider {} "
                                "binds by address",
                                i, entry, names.empty() ? "none" : names, prov));
    }
    out[i].requested = entry;
    out[i].device = entry;
  }
  return out;
}

}  // namespace fabric::domain
