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
};

Result<OpenedDomains> open_domains(const EngineConfig& config);

}  // namespace fabric::domain
