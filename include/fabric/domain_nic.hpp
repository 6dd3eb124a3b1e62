#pragma once
// Which NIC a Domain uses: EngineConfig::nics as resolved on this host
// (docs/api.md, "NIC per Domain").

#include <string>

namespace fabric {

struct DomainNic {
  // The EngineConfig::nics entry it came from; empty when nics was empty.
  std::string requested;
  // IP-based providers (tcp, sockets, udp): the interface holding `address`,
  // and the address the Domain's endpoint binds.
  std::string interface;
  std::string address;
  // The provider's own name for the device: libfabric's domain_attr->name
  // ("rdmap16s27-rdm", "nic1", "shm") or the verbs device ("mlx5_0").
  std::string device;
  // Index into Topology::nics when the topology plan chose this device
  // (EngineConfig::nics empty), else -1.
  int topology_nic = -1;

  // For logs and fabric-info: "nic1 198.18.1.1", "rdmap16s27-rdm".
  [[nodiscard]] std::string to_string() const;
};

}  // namespace fabric
