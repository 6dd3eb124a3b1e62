// The topology plan turned into one device per Domain (fabric/nic_plan.hpp).
// Pure: works on a Topology value and, when the caller has it, the list of
// devices the provider offers; probes and opens nothing.

#include "fabric/nic_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "libfabric/fi_provider.hpp"

namespace fabric {

namespace {

constexpr std::string_view kNoDriverPrefix = "pci:";

// The name the kernel's EFA driver gets under rdma-core's PCI naming rule
// (udev rdma_rename NAME_PCI): "rdmap<bus>s<slot>", with "P<domain>" in front
// for a PCI domain other than 0 and "f<function>" after a function other than 0.
std::string efa_name_from_busid(const std::string& busid) {
  unsigned domain = 0, bus = 0, slot = 0, function = 0;
  if (std::sscanf(busid.c_str(), "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4) return {};
  std::string name = domain != 0 ? fmt::format("rdmaP{}p{}s{}", domain, bus, slot)
                                 : fmt::format("rdmap{}s{}", bus, slot);
  if (function != 0) name += fmt::format("f{}", function);
  return name;
}

// A device the provider lists for a NIC: the derived name itself, or the
// NIC's name followed by a provider suffix ("rdmap4s0" -> "rdmap4s0-rdm").
std::optional<std::string> offered_name(const ProviderDevices& offered, const NicInfo& nic,
                                        const std::string& derived) {
  for (const auto& name : offered.names) {
    if (!derived.empty() && name == derived) return name;
  }
  if (nic.name.starts_with(kNoDriverPrefix)) return std::nullopt;
  for (const auto& name : offered.names) {
    if (name == nic.name || name.starts_with(nic.name + "-")) return name;
  }
  return std::nullopt;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none" : s;
}

GroupNics base_of(const GroupPlan& group, std::size_t domains) {
  GroupNics out;
  out.gpu = group.gpu;
  out.numa = group.numa;
  out.cpus = group.cpus;
  out.domains.resize(domains);
  return out;
}

GroupNics provider_default(GroupNics out, const EngineConfig& config, bool ip,
                           std::string note) {
  out.source = NicSource::provider_default;
  if (ip) {
    for (auto& d : out.domains) d.address = config.bind_address;
  }
  out.note = std::move(note);
  return out;
}

}  // namespace

std::string_view to_string(NicSource source) noexcept {
  switch (source) {
    case NicSource::configured: return "configured";
    case NicSource::plan: return "topology plan";
    case NicSource::provider_default: return "provider default";
  }
  return "?";
}

std::string provider_device_name(const NicInfo& nic, Backend backend, std::string_view provider) {
  const bool no_driver = nic.name.starts_with(kNoDriverPrefix);
  if (backend == Backend::verbs) return no_driver ? std::string() : nic.name;
  const std::string prov = ofi::provider_string(provider);
  if (prov == "auto" || prov == "shm" || ofi::is_ip_provider(prov)) return {};
  if (prov == "efa") {
    if (nic.kind != NicKind::efa) return {};
    const std::string base = no_driver ? efa_name_from_busid(nic.pci_busid) : nic.name;
    return base.empty() ? std::string() : base + "-rdm";
  }
  // Other providers name domains after the verbs device (with a suffix, if
  // any, found by matching against what the provider lists).
  return no_driver ? std::string() : nic.name;
}

Result<GroupNics> plan_group_nics(const Topology& topology, const GroupPlan& group,
                                  const EngineConfig& config,
                                  const std::optional<ProviderDevices>& offered) {
  const std::size_t k = config.domains_per_group;
  if (k == 0 || k > NetAddr::kMaxDomains) {
    return Status(Errc::invalid_argument, fmt::format("domains_per_group {} not in 1..{}", k,
                                                      NetAddr::kMaxDomains));
  }
  if (!config.nics.empty() && config.nics.size() != k) {
    return Status(Errc::invalid_argument,
                  fmt::format("EngineConfig::nics names {} NICs but domains_per_group is {}: "
                              "give one per Domain",
                              config.nics.size(), k));
  }
  GroupNics out = base_of(group, k);
  const bool verbs = config.backend == Backend::verbs;
  const std::string prov = verbs ? std::string("verbs")
                           : offered && !offered->provider.empty()
                               ? offered->provider
                               : ofi::provider_string(config.provider);
  const bool ip = !verbs && ofi::is_ip_provider(prov);

  if (!config.nics.empty()) {
    out.source = NicSource::configured;
    for (std::size_t i = 0; i < k; ++i) {
      out.domains[i].requested = config.nics[i];
      // IP entries become an interface and address only on the host itself
      // (resolve_domain_nics); device names stand as given.
      if (!ip) out.domains[i].device = config.nics[i];
    }
    return out;
  }
  if (verbs && !config.verbs.device.empty()) {
    out.source = NicSource::configured;
    for (auto& d : out.domains) d.device = config.verbs.device;
    return out;
  }
  if (ip) {
    return provider_default(std::move(out), config, true,
                            fmt::format("{} binds bind_address {} unless EngineConfig::nics "
                                        "names interfaces",
                                        prov, config.bind_address));
  }
  if (prov == "auto" || prov == "shm") {
    return provider_default(std::move(out), config, false,
                            fmt::format("provider {} opens no named NIC", prov));
  }
  if (!verbs && prov != "efa" && !offered) {
    return provider_default(
        std::move(out), config, false,
        fmt::format("provider {}: its device names are known only on the host", prov));
  }

  struct Pick {
    int nic;
    std::string device;
  };
  std::vector<Pick> usable;
  std::vector<std::string> planned;
  for (const auto& a : group.nics) {
    if (a.nic < 0 || static_cast<std::size_t>(a.nic) >= topology.nics.size()) continue;
    const NicInfo& nic = topology.nics[a.nic];
    planned.push_back(nic.name);
    std::string derived = provider_device_name(nic, config.backend, prov);
    if (offered) {
      auto name = offered_name(*offered, nic, derived);
      if (!name) continue;
      derived = std::move(*name);
    }
    if (derived.empty()) continue;
    // A device listed twice in the plan would be two Domains on one NIC by accident.
    const bool seen = std::any_of(usable.begin(), usable.end(),
                                  [&](const Pick& p) { return p.device == derived; });
    if (!seen) usable.push_back({a.nic, std::move(derived)});
  }
  if (usable.empty()) {
    std::string why =
        group.nics.empty()
            ? std::string("the topology plan has no NIC for this group")
            : fmt::format("none of the plan's NICs ({}) is a device of {}{}", joined(planned), prov,
                          offered ? fmt::format(" (it offers: {})", joined(offered->names)) : "");
    return provider_default(std::move(out), config, false, std::move(why));
  }
  out.source = NicSource::plan;
  for (std::size_t i = 0; i < k; ++i) {
    const Pick& p = usable[i % usable.size()];
    out.domains[i].device = p.device;
    out.domains[i].topology_nic = p.nic;
  }
  if (usable.size() < k) {
    out.note = fmt::format(
        "{} Domains on {} NIC{} of this group: Domain i opens NIC i mod {}, so NICs are shared "
        "(set domains_per_group to {} for one NIC per Domain)",
        k, usable.size(), usable.size() == 1 ? "" : "s", usable.size(), usable.size());
  } else if (usable.size() > k) {
    out.note = fmt::format("{} Domain{} on the first {} of the {} NICs planned for this group "
                           "(domains_per_group {} uses them all)",
                           k, k == 1 ? "" : "s", k, usable.size(), usable.size());
  }
  return out;
}

}  // namespace fabric
