#include "topology/hwloc_topology.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

#include "common/log.hpp"

namespace fabric::topo {

namespace {

// Plugins that would start a GPU runtime (CUDA, NVML, OpenCL, ROCm, Level Zero)
// or connect to an X server (gl) inside the caller's process just to name
// devices; GPUs are found by their PCI IDs instead. Also the libpciaccess
// plugin ("pci"): hwloc's Linux backend reads the same PCI tree from sysfs (as
// it does where libhwloc-plugins is not installed), and libpciaccess leaks on
// every load, which would fail the sanitizer builds. It only adds device names.
constexpr const char* kSkippedComponents[] = {"cuda",      "nvml", "opencl", "rsmi",
                                              "levelzero", "gl",   "pci"};

void skip_components(hwloc_topology_t topology) {
  for (const char* name : kSkippedComponents) {
    // Fails only for names this hwloc never heard of, which is what we want.
    (void)hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, name);
  }
}

}  // namespace

Result<HwlocTopology> HwlocTopology::load_system() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    return Status(Errc::provider,
                  fmt::format("hwloc_topology_init failed: {}", std::strerror(errno)));
  }
  HwlocTopology topology(raw);
  // Bridges, PCI and OS devices are dropped by default; matching needs them all.
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  skip_components(raw);
  if (hwloc_topology_load(raw) != 0) {
    return Status(Errc::provider,
                  fmt::format("hwloc could not probe this machine: {}", std::strerror(errno)));
  }
  return topology;
}

Result<HwlocTopology> HwlocTopology::load_xml(std::string_view xml, std::string_view origin) {
  // hwloc wants the length including a terminating NUL, as its exporter writes it.
  if (xml.size() >= static_cast<std::size_t>(INT_MAX)) {
    return Status(Errc::invalid_argument, fmt::format("{}: XML too large", origin));
  }
  const std::string text(xml);
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    return Status(Errc::provider,
                  fmt::format("hwloc_topology_init failed: {}", std::strerror(errno)));
  }
  HwlocTopology topology(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  skip_components(raw);
  if (hwloc_topology_set_xmlbuffer(raw, text.c_str(), static_cast<int>(text.size() + 1)) != 0) {
    return Status(
        Errc::malformed,
        fmt::format("{}: not hwloc topology XML; `hwloc-ls --input FILE` shows why", origin));
  }
  if (hwloc_topology_load(raw) != 0) {
    return Status(Errc::malformed,
                  fmt::format("{}: hwloc could not build a topology from this XML; "
                              "`hwloc-ls --input FILE` shows why",
                              origin));
  }
  log::debug("hwloc topology loaded from {}", origin);
  return topology;
}

Result<HwlocTopology> HwlocTopology::load_xml_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status(Errc::not_found,
                  fmt::format("cannot open topology file {}: {}", path, std::strerror(errno)));
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    return Status(Errc::not_found, fmt::format("cannot read topology file {}", path));
  }
  if (text.empty()) return Status(Errc::malformed, fmt::format("{}: file is empty", path));
  return load_xml(text, path);
}

HwlocTopology::HwlocTopology(HwlocTopology&& other) noexcept
    : topology_(std::exchange(other.topology_, nullptr)) {}

HwlocTopology& HwlocTopology::operator=(HwlocTopology&& other) noexcept {
  if (this != &other) {
    reset();
    topology_ = std::exchange(other.topology_, nullptr);
  }
  return *this;
}

void HwlocTopology::reset() noexcept {
  if (topology_ != nullptr) hwloc_topology_destroy(topology_);
  topology_ = nullptr;
}

}  // namespace fabric::topo
