#pragma once
// Opens the Domains of one group for the configured backend.

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

// The seam through which tests wrap the Domains an engine opens (a ReorderingDomain, a
// FakeDomain in place of the real one). The production library only declares it, weak: it is
// defined by the test doubles library (tests/support/doubles/domain_decorator.cpp, whose
// set_test_decorator() sets it up), so a program that does not link that holds no hook, no
// state and no lock, and open_domains() returns what it opened.
[[gnu::weak]] std::unique_ptr<Domain> decorate_for_test(std::unique_ptr<Domain> opened);

}  // namespace fabric::domain
