#include "domain/open_domains.hpp"

#include <fmt/format.h>

#include <mutex>

#include "cuda/driver.hpp"
#include "libfabric/fi_domain.hpp"
#include "verbs/verbs_domain.hpp"

namespace fabric::domain {

namespace {

std::mutex g_decorator_mutex;
DomainDecorator g_decorator;

// Copied under the lock so a test resetting the hook cannot race an opening engine.
DomainDecorator current_decorator() {
  std::lock_guard lock(g_decorator_mutex);
  return g_decorator;
}

Result<OpenedDomains> open_backend(const EngineConfig& config) {
  if (config.domains_per_group == 0 || config.domains_per_group > NetAddr::kMaxDomains) {
    return Status(Errc::invalid_argument,
                  fmt::format("domains_per_group {} not in 1..{}", config.domains_per_group,
                              NetAddr::kMaxDomains));
  }
  OpenedDomains out;
  out.backend = config.backend;
  if (config.backend == Backend::verbs) {
    for (std::uint32_t i = 0; i < config.domains_per_group; ++i) {
      auto d = verbs::VerbsDomain::open(config.verbs, i);
      if (!d) return d.status();
      out.domains.push_back(std::move(d).value());
    }
    out.provider = out.domains.front()->limits().provider;
    return out;
  }
  // Only where a CUDA driver and device exist: elsewhere FI_HMEM buys nothing.
  const bool gpu_host = cuda::driver().ok();
  const ofi::ProviderQuery query{config.provider, config.bind_address, config.delivery_complete,
                                 gpu_host};
  for (std::uint32_t i = 0; i < config.domains_per_group; ++i) {
    auto d = ofi::FiDomain::open(query);
    if (!d) return d.status();
    out.domains.push_back(std::move(d).value());
  }
  out.provider = out.domains.front()->limits().provider;
  return out;
}

}  // namespace

void set_test_decorator(DomainDecorator decorator) {
  std::lock_guard lock(g_decorator_mutex);
  g_decorator = std::move(decorator);
}

Result<OpenedDomains> open_domains(const EngineConfig& config) {
  auto opened = open_backend(config);
  if (!opened) return opened;
  if (auto decorate = current_decorator()) {
    for (auto& d : opened->domains) d = decorate(std::move(d));
  }
  return opened;
}

}  // namespace fabric::domain
