#pragma once
// Choosing and describing the libfabric provider behind a Domain.

#include <rdma/fabric.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// The error for an IP provider told to bind where no local interface is.
Status cannot_bind(std::string_view provider_string, const std::string& bind_address);

// fi_getinfo for an RDM endpoint with MSG + RMA + remote CQ data and every
// mr_mode bit the engine can honour; returns the first match.
Result<InfoPtr> find_provider(const ProviderQuery& query);

// The domains a provider offers for the engine's endpoint (the domain_attr->name
// of every fi_getinfo match, deduplicated, in libfabric's order), and the
// provider string they belong to: for "auto", the provider libfabric ranks
// first. Asked without a node, so IP providers list their interfaces. Empty
// names when the provider is absent.
struct ProviderDomains {
  std::string provider;
  std::vector<std::string> names;
};
ProviderDomains list_domains(const std::string& provider);

}  // namespace fabric::ofi
