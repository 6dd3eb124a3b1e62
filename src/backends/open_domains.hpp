#pragma once
// Opens the Domains of one group for the configured backend.

#include <functional>
#include <memory>
#include <vector>

#include "domain/domain.hpp"
#include "fabric/engine.hpp"

namespace fabric::domain {

struct OpenedDomains {
  Backend backend = Backend::libfabric;
  std::string provider;  // as opened, e.g. "tcp;ofi_rxm"
  std::vector<std::unique_ptr<Domain>> domains;
  std::vector<DomainNic> nics;  // what each Domain opened, Domain i at [i]
};

// config.nics are the group's entries; `group` picks its topology plan when they are empty.
// TransferEngine::create() has checked config.domains_per_group (1..NetAddr::kMaxDomains).
Result<OpenedDomains> open_domains(const EngineConfig& config, std::size_t group = 0);

// TEST-ONLY. When set, open_domains() passes every Domain it opens through
// this function and uses what it returns (e.g. a ReorderingDomain around it).
// Process-wide; affects engines created after the call; an empty function
// (the default) turns it off. Production code never sets it.
using DomainDecorator = std::function<std::unique_ptr<Domain>(std::unique_ptr<Domain>)>;
void set_test_decorator(DomainDecorator decorator);

}  // namespace fabric::domain
