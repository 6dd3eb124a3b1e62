// fi_getinfo with what the engine asks of a provider (src/libfabric/fi_provider.cpp),
// listing every match instead of taking the first.

#include <fmt/format.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string_view>
#include <utility>

#include "libfabric/fi_hints.hpp"
#include "probes.hpp"

namespace info {

namespace {

constexpr auto kApiVersion = FI_VERSION(1, 17);
constexpr const char* kLoopback = "127.0.0.1";

struct InfoFree {
  void operator()(fi_info* p) const noexcept { fi_freeinfo(p); }
};
using InfoList = std::unique_ptr<fi_info, InfoFree>;

// Providers whose endpoints are sockets on an IP interface.
bool is_socket_provider(std::string_view prov) {
  constexpr std::array<std::string_view, 4> kSocket = {"tcp", "udp", "sockets", "net"};
  return std::any_of(kSocket.begin(), kSocket.end(),
                     [&](std::string_view p) { return prov.starts_with(p); });
}

InfoList query(const char* node, bool hmem = false) {
  // Exactly what the engine asks for (src/libfabric/fi_hints.hpp).
  fabric::ofi::InfoPtr hints = fabric::ofi::engine_hints("", false, hmem);
  fi_info* found = nullptr;
  const int rc =
      fi_getinfo(kApiVersion, node, nullptr, node != nullptr ? FI_SOURCE : 0, hints.get(), &found);
  return InfoList(rc == 0 ? found : nullptr);
}

}  // namespace

ProviderScan scan_providers() {
  // Before the first fi_getinfo: libfabric reads these once, at provider init.
  ::setenv("FI_TCP_IFACE", "lo", 1);
  ::setenv("FI_SOCKETS_IFACE", "lo", 1);

  ProviderScan scan;
  const std::uint32_t v = fi_version();
  scan.libfabric_version = fmt::format("{}.{}", FI_MAJOR(v), FI_MINOR(v));

  // (provider, domain) -> best entry; fi_getinfo lists one per attribute variant.
  std::map<std::pair<std::string, std::string>, ProviderEntry> seen;
  auto collect = [&](const InfoList& list, bool socket_pass, const char* node) {
    for (const fi_info* i = list.get(); i != nullptr; i = i->next) {
      const std::string prov = i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "";
      if (is_socket_provider(prov) != socket_pass) continue;
      ProviderEntry e{prov, i->domain_attr->name ? i->domain_attr->name : "",
                      i->fabric_attr->name ? i->fabric_attr->name : "",
                      i->domain_attr->cq_data_size,
                      node ? std::optional<std::string>(node) : std::nullopt};
      auto [it, inserted] = seen.try_emplace({e.provider, e.domain}, e);
      if (!inserted) it->second.cq_data_size = std::max(it->second.cq_data_size, e.cq_data_size);
    }
  };
  collect(query(nullptr), /*socket_pass=*/false, nullptr);
  collect(query(kLoopback), /*socket_pass=*/true, kLoopback);
  // What the engine asks for first on a GPU host (src/libfabric/fi_provider.cpp).
  for (const char* node : {static_cast<const char*>(nullptr), kLoopback}) {
    const InfoList list = query(node, /*hmem=*/true);
    for (const fi_info* i = list.get(); i != nullptr; i = i->next) {
      const std::string prov = i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "";
      const std::string dom = i->domain_attr->name ? i->domain_attr->name : "";
      if (auto it = seen.find({prov, dom}); it != seen.end()) it->second.hmem = true;
    }
  }

  for (auto& [key, entry] : seen) {
    (entry.cq_data_size >= 4 ? scan.usable : scan.too_little_cq_data).push_back(std::move(entry));
  }
  return scan;
}

}  // namespace info
