#include "topology/pci_ids.hpp"

namespace fabric::topo {

namespace {

constexpr std::uint16_t kClassVga = 0x0300;
constexpr std::uint16_t kClass3d = 0x0302;

// EFA generations so far are 0xefa0-0xefa3; the family keeps the 0xefaN pattern.
bool is_efa_device(std::uint16_t device) noexcept { return (device & 0xfff0) == 0xefa0; }

bool has_prefix_and_number(std::string_view name, std::string_view prefix) noexcept {
  if (!name.starts_with(prefix) || name.size() == prefix.size()) return false;
  for (char c : name.substr(prefix.size())) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

bool is_gpu_pci(std::uint16_t vendor, std::uint16_t class_id) noexcept {
  return vendor == kVendorNvidia && (class_id == kClassVga || class_id == kClass3d);
}

bool is_gpu_osdev_name(std::string_view name) noexcept {
  return has_prefix_and_number(name, "cuda") || has_prefix_and_number(name, "nvml");
}

std::optional<NicKind> rdma_pci_kind(std::uint16_t vendor, std::uint16_t device,
                                     std::uint16_t class_id) noexcept {
  if (vendor == kVendorAmazon && is_efa_device(device)) return NicKind::efa;
  // Base class 0x02: network controllers (Ethernet 0x0200, InfiniBand 0x0207).
  if (vendor == kVendorMellanox && (class_id >> 8) == 0x02) return NicKind::connectx;
  return std::nullopt;
}

NicKind nic_kind(std::uint16_t vendor, std::string_view name) noexcept {
  if (vendor == kVendorAmazon) return NicKind::efa;
  if (vendor == kVendorMellanox) return NicKind::connectx;
  if (vendor != 0) return NicKind::other;
  if (name.starts_with("efa") || name.starts_with("rdmap")) return NicKind::efa;
  if (name.starts_with("mlx")) return NicKind::connectx;
  return NicKind::other;
}

}  // namespace fabric::topo

namespace fabric {

std::string_view to_string(NicKind kind) noexcept {
  switch (kind) {
    case NicKind::efa:
      return "efa";
    case NicKind::connectx:
      return "connectx";
    case NicKind::other:
      return "other";
  }
  return "?";
}

}  // namespace fabric
