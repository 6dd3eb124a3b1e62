#pragma once
// Finding and opening the ibverbs device port a Domain runs on.

#include <infiniband/verbs.h>

#include <cstddef>
#include <optional>
#include <string>

#include "fabric/backends.hpp"
#include "fabric/status.hpp"
#include "fabric/verbs_config.hpp"
#include "verbs/ib_handles.hpp"

namespace fabric::verbs {

struct OpenedPort {
  ContextPtr context;
  VerbsPortInfo info;
  std::uint8_t port = 1;
  std::uint32_t gid_index = 0;
  ibv_gid gid{};
  ibv_mtu mtu = IBV_MTU_1024;
  ibv_device_attr device_attr{};
};

// The port Domain `domain_index` of a group uses: the configured device, or
// the active ports round robin.
Result<OpenedPort> open_port(const VerbsConfig& config, std::size_t domain_index);

// For list_verbs_ports(): the device list and one port's public description.
Result<DeviceListPtr> device_list_for_query(int& count);
Result<VerbsPortInfo> probe_port_for_query(ibv_context* ctx, const char* name, std::uint8_t port,
                                           std::optional<std::uint32_t> wanted_gid);

std::string gid_text(const ibv_gid& gid);
std::uint32_t mtu_bytes(ibv_mtu mtu);

}  // namespace fabric::verbs
