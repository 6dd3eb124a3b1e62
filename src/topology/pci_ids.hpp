#pragma once
// Which PCI functions and OS devices are GPUs or RDMA NICs.

#include <cstdint>
#include <optional>
#include <string_view>

#include "fabric/topology.hpp"

namespace fabric::topo {

inline constexpr std::uint16_t kVendorNvidia = 0x10de;
inline constexpr std::uint16_t kVendorAmazon = 0x1d0f;
inline constexpr std::uint16_t kVendorMellanox = 0x15b3;

// An NVIDIA display (0x0300) or 3D (0x0302) controller. NVSwitches (0x0680)
// and the GPU's audio function are not GPUs.
[[nodiscard]] bool is_gpu_pci(std::uint16_t vendor, std::uint16_t class_id) noexcept;

// hwloc GPU/co-processor OS devices that name a CUDA device ("cuda0", "nvml0").
// Display devices ("card0", "renderD128") are not enough: a VM's emulated VGA has them.
[[nodiscard]] bool is_gpu_osdev_name(std::string_view name) noexcept;

// The NIC kind of a PCI function that is an RDMA NIC even when its driver is
// not loaded (no verbs device): Amazon EFA, Mellanox network controllers.
// nullopt for everything else, ENA and plain Ethernet included.
[[nodiscard]] std::optional<NicKind> rdma_pci_kind(std::uint16_t vendor, std::uint16_t device,
                                                   std::uint16_t class_id) noexcept;

// The kind of a verbs device, from its PCI vendor when known, else its name.
[[nodiscard]] NicKind nic_kind(std::uint16_t vendor, std::string_view name) noexcept;

}  // namespace fabric::topo
