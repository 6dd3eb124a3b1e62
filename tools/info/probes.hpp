#pragma once
// Read-only probes of what this host offers the engine: libfabric providers,
// verbs devices, a CUDA driver. None opens an endpoint or a device.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fabric/backends.hpp>

namespace info {

struct ProviderEntry {
  std::string provider;  // "shm", "tcp;ofi_rxm", "efa", …
  std::string domain;    // "shm", "lo", "rdmap79s0-rdm", "mlx5_0", …
  std::string fabric;
  std::size_t cq_data_size = 0;
  std::optional<std::string> node;  // the address IP providers were asked about
  // Also matches with FI_HMEM: reg_mr of GPU memory works (FI_HMEM_CUDA).
  bool hmem = false;
};

struct ProviderScan {
  std::string libfabric_version;
  std::vector<ProviderEntry> usable;  // RDM + MSG + RMA + remote CQ data >= 4 bytes
  std::vector<ProviderEntry> too_little_cq_data;
};

// Sets FI_TCP_IFACE / FI_SOCKETS_IFACE to "lo" first, so the socket providers
// look at loopback only; they are asked about 127.0.0.1 with FI_SOURCE.
ProviderScan scan_providers();

struct VerbsDevice {
  std::string name;
  std::uint64_t node_guid = 0;  // host byte order
};

struct VerbsScan {
  bool library = false;  // libibverbs.so.1 could be loaded
  std::string note;      // why there is no list, when there is none
  std::vector<VerbsDevice> devices;
  // Each port as the verbs backend sees it, with the GID it would pick.
  std::vector<fabric::VerbsPortInfo> ports;
};

VerbsScan scan_verbs();

struct CudaProbe {
  bool present = false;  // libcuda.so.1 loads
  std::string note;
  // How the verbs backend would register GPU memory: dma-buf when the driver
  // exports one (cuMemGetHandleForAddressRange), else nvidia-peermem.
  bool dmabuf_export = false;
  bool peermem_module = false;  // /sys/module/nvidia_peermem
};

CudaProbe probe_cuda();

}  // namespace info
