#pragma once
// Runtime queries: which backends and devices this host can open. One build
// runs everywhere; nothing here fails on a host without RDMA hardware.

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/net_addr.hpp"
#include "fabric/status.hpp"

namespace fabric {

// One port of an ibverbs device, as the verbs backend would use it.
struct VerbsPortInfo {
  std::string device;          // "mlx5_0", "rxe0"
  std::uint8_t port = 1;
  bool active = false;         // IBV_PORT_ACTIVE
  std::string link_layer;      // "Ethernet" (RoCE) or "InfiniBand"
  std::uint32_t active_mtu = 0;  // bytes
  double link_gbps = 0;        // width x speed, 0 when the device does not say
  std::uint16_t lid = 0;
  // The GID index the backend picks by default, its text and type, or -1
  // when the port has no usable GID.
  int gid_index = -1;
  std::string gid;
  std::string gid_type;        // "RoCE v2", "RoCE v1", "IB"
};

// Every port of every ibverbs device; empty without devices or libibverbs
// providers. Errors only for a failing device query.
Result<std::vector<VerbsPortInfo>> list_verbs_ports();

// True when create() with this backend can find a device to open.
[[nodiscard]] bool backend_available(Backend backend);

}  // namespace fabric
