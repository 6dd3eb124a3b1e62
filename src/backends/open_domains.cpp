#include "backends/open_domains.hpp"

#include <fmt/format.h>

#include "cuda/driver.hpp"
#include "backends/nic_choice.hpp"
#include "libfabric/fi_domain.hpp"
#include "verbs/verbs_domain.hpp"

namespace fabric::domain {

namespace {

Result<OpenedDomains> open_backend(const EngineConfig& config, std::size_t group) {
  auto nics = resolve_nics(config, group);
  if (!nics) return nics.status();
  OpenedDomains out;
  out.backend = config.backend;
  out.nics = std::move(nics).value();
  // Only where a CUDA driver and device exist: elsewhere FI_HMEM buys nothing.
  const bool gpu_host = config.backend == Backend::libfabric && cuda::driver().ok();
  auto open_one = [&](std::uint32_t i, const DomainNic& nic) -> Result<std::unique_ptr<Domain>> {
    if (config.backend == Backend::verbs) {
      VerbsConfig verbs = config.verbs;
      if (!nic.device.empty()) verbs.device = nic.device;
      auto d = verbs::VerbsDomain::open(verbs, i);
      if (!d) return d.status();
      return std::unique_ptr<Domain>(std::move(d).value());
    }
    // Each Domain binds its own NIC's address (or opens its own named
    // device): K Domains are K NICs, not K copies of the first fi_getinfo entry.
    ofi::ProviderQuery query{config.provider,
                             nic.address.empty() ? config.bind_address : nic.address,
                             config.delivery_complete, gpu_host};
    if (nic.address.empty()) query.domain_name = nic.device;
    auto d = ofi::FiDomain::open(query);
    if (!d) return d.status();
    return std::unique_ptr<Domain>(std::move(d).value());
  };
  for (std::uint32_t i = 0; i < config.domains_per_group; ++i) {
    DomainNic& nic = out.nics[i];
    auto d = open_one(i, nic);
    if (!d && (!config.nics.empty() || nic.topology_nic >= 0)) {
      return Status(d.status().code(),
                    fmt::format("Domain {} on {}{}: {}", i, nic.to_string(),
                                config.nics.empty() ? " (topology plan; EngineConfig::nics "
                                                      "overrides it)"
                                                    : "",
                                d.status().message()));
    }
    if (!d) return d.status();
    nic.device = d.value()->limits().device;
    out.domains.push_back(std::move(d).value());
  }
  out.provider = out.domains.front()->limits().provider;
  return out;
}

}  // namespace

Result<OpenedDomains> open_domains(const EngineConfig& config, std::size_t group) {
  auto opened = open_backend(config, group);
  if (!opened) return opened;
  // Null unless a test-doubles library is linked (open_domains.hpp).
  if (decorate_for_test != nullptr) {
    for (auto& d : opened->domains) d = decorate_for_test(std::move(d));
  }
  return opened;
}

}  // namespace fabric::domain
