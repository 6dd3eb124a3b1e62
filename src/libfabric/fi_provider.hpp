#pragma once
// Choosing and describing the libfabric provider behind a Domain.

#include <rdma/fabric.h>

#include <optional>
#include <string>
#include <string_view>

#include "fabric/status.hpp"
#include "libfabric/fi_handles.hpp"

namespace fabric::ofi {

// The libfabric provider string for a user-facing name ("tcp" → "tcp;ofi_rxm").
std::string provider_string(std::string_view name);

// Providers whose endpoints are IP sockets: bound to the configured address.
bool is_ip_provider(std::string_view provider_string);

struct ProviderQuery {
  std::string provider;      // user-facing name, or "auto"
  std::string bind_address;  // for IP providers
  // Writes complete once delivered at the target; unset: per-provider default.
  std::optional<bool> delivery_complete;
  // Ask for FI_HMEM (GPU memory registration) first, falling back without it.
  bool want_hmem = false;
  // Non-empty: the entry whose domain_attr->name is this (an EFA device,
  // EngineConfig::nics), else the first match.
  std::string domain_name;
};

bool prov_defaults_to_delivery_complete(std::string_view provider_string);

// fi_getinfo for an RDM endpoint with MSG + RMA + remote CQ data and every
// mr_mode bit the engine can honour; returns the first match.
Result<InfoPtr> find_provider(const ProviderQuery& query);

}  // namespace fabric::ofi
