#pragma once
// Where the GPUs, RDMA NICs and CPU cores of a host are, and which of them each
// DomainGroup should use. Plain values, detected once with hwloc; docs/topology.md.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/status.hpp"

namespace fabric {

// Linux CPU numbers (hwloc PU os indexes), sorted and unique.
struct CpuSet {
  std::vector<int> cpus;

  // Sorts and removes duplicates; negative numbers are dropped.
  static CpuSet from(std::vector<int> cpus);
  // Linux cpulist syntax, as in /sys and taskset -c: "0-3,8,10-11".
  static Result<CpuSet> parse(std::string_view list);

  [[nodiscard]] bool empty() const noexcept { return cpus.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return cpus.size(); }
  [[nodiscard]] bool contains(int cpu) const noexcept;
  // cpulist syntax; "" for the empty set.
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const CpuSet&, const CpuSet&) = default;
};

struct NumaInfo {
  int os_index = -1;
  int package = -1;  // socket os index, -1 when unknown
  CpuSet cpus;
  std::vector<CpuSet> cores;  // one entry per physical core: its hardware threads
  std::uint64_t memory_bytes = 0;
};

struct GpuInfo {
  // Position in Topology::gpus: PCI bus order, which is the CUDA ordinal under
  // CUDA_DEVICE_ORDER=PCI_BUS_ID (and for identical GPUs also by default).
  int index = -1;
  std::string pci_busid;  // "0000:53:00.0"; empty when hwloc saw no PCI device
  std::uint16_t vendor_id = 0;
  std::uint16_t device_id = 0;
  std::string model;                    // PCI device name when hwloc knows it
  std::vector<std::string> os_devices;  // "cuda0", "nvml0", … as hwloc reports them
  int numa = -1;
  int package = -1;
};

enum class NicKind : std::uint8_t { efa, connectx, other };
[[nodiscard]] std::string_view to_string(NicKind kind) noexcept;

struct NicInfo {
  int index = -1;    // position in Topology::nics (PCI bus order)
  std::string name;  // verbs device ("mlx5_0", "rdmap79s0"); "pci:<busid>" without a driver
  NicKind kind = NicKind::other;
  std::string pci_busid;
  std::uint16_t vendor_id = 0;
  std::uint16_t device_id = 0;
  std::string model;
  std::string netdev;  // its network interface ("ibp12s0"), if any
  int numa = -1;
  int package = -1;
};

// How close a NIC is to the GPU of its group, best first.
enum class Affinity : std::uint8_t {
  pcie_switch,  // below a common PCIe bridge: peer-to-peer traffic skips the root complex
  pcie_root,    // same host bridge (root complex), different root ports
  numa,         // same NUMA node
  socket,       // same package, another NUMA node
  system,       // across the inter-socket link
};
[[nodiscard]] std::string_view to_string(Affinity affinity) noexcept;

struct NicAssignment {
  int nic = -1;  // index into Topology::nics
  Affinity affinity = Affinity::system;
};

// What one DomainGroup should use.
struct GroupPlan {
  int gpu = -1;  // index into Topology::gpus; -1 for the host group of a GPU-less machine
  // Every group has the same number of NICs (peers must agree on the Domain
  // count); empty when the machine has no RDMA NIC (software providers).
  std::vector<NicAssignment> nics;
  int numa = -1;
  CpuSet cpus;  // the CPUs of that NUMA node: where its worker may run
  CpuSet core;  // one core of it, distinct per group while the node has cores to spare
};

struct Topology {
  std::string source;  // "this machine" or the XML file it was read from
  std::vector<GpuInfo> gpus;
  std::vector<NicInfo> nics;
  std::vector<NumaInfo> numa;
  // One per GPU in GPU order (the host is served by the first), or one host
  // group when there is no GPU.
  std::vector<GroupPlan> groups;
  CpuSet cpus;  // every CPU the topology allows
  std::size_t cores = 0;
};

struct TopologyOptions {
  // Read this hwloc XML file (lstopo --of xml) instead of probing the machine.
  std::optional<std::string> xml_path;
  // NICs per group, 1–4. Fewer are used when there are not that many NICs per
  // GPU, so that no NIC serves two groups unless NICs are fewer than GPUs.
  int max_nics_per_gpu = 4;
};

// Probes the machine (or reads the XML) and plans the groups. Errors:
// invalid_argument (bad options), not_found (missing file), malformed (XML
// hwloc cannot load), provider (hwloc failed on this machine).
Result<Topology> detect_topology(const TopologyOptions& options = {});

// Where the engine's threads are placed.
enum class Pinning : std::uint8_t {
  off,   // let the scheduler decide
  numa,  // a worker may run on any CPU of its group's NUMA node
  core,  // a worker runs on its group's own core (GroupPlan::core)
};
[[nodiscard]] std::string_view to_string(Pinning pinning) noexcept;
// "off", "numa" or "core".
Result<Pinning> parse_pinning(std::string_view text);
// off when fewer than 4 CPUs are usable (pinned busy workers would starve the
// application on an oversubscribed box), numa otherwise.
[[nodiscard]] Pinning default_pinning(std::size_t usable_cpus) noexcept;
// The same for the CPUs this process may run on (sched_getaffinity).
[[nodiscard]] Pinning default_pinning() noexcept;
// The CPUs a group's worker should be pinned to; empty for Pinning::off.
[[nodiscard]] CpuSet worker_cpus(const GroupPlan& group, Pinning pinning);

// Restricts the calling thread to `cpus`. invalid_argument when the set is
// empty or none of it is usable by this process.
Status pin_current_thread(const CpuSet& cpus);
// The CPUs the calling thread may run on.
Result<CpuSet> current_thread_affinity();

}  // namespace fabric
