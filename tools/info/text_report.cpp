#include <fmt/format.h>

#include <fabric/version.hpp>
#include <iterator>
#include <string>
#include <vector>

#include "report.hpp"

namespace info {

namespace {

using fabric::Topology;
// The report is built in memory: the command prints it, the Python binding returns it.
using Out = std::back_insert_iterator<std::string>;

std::string gib(std::uint64_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / double(1ull << 30));
}

std::string pci_id(std::uint16_t vendor, std::uint16_t device) {
  return fmt::format("{:04x}:{:04x}", vendor, device);
}

std::string group_name(int gpu) { return gpu < 0 ? "host" : fmt::format("GPU{}", gpu); }

void write_topology(Out out, const Topology& t, int max_nics) {
  fmt::format_to(out, "CPUs       {} ({} cores, {} NUMA node{})\n", t.cpus.to_string(), t.cores,
                 t.numa.size(), t.numa.size() == 1 ? "" : "s");
  for (const auto& n : t.numa) {
    fmt::format_to(out, "  NUMA {:<3} package {:<2} cpus {:<18} cores {:<4} memory {}\n",
                   n.os_index, n.package, n.cpus.empty() ? "-" : n.cpus.to_string(), n.cores.size(),
                   gib(n.memory_bytes));
  }
  fmt::format_to(out, "GPUs       {}\n", t.gpus.empty() ? "none" : std::to_string(t.gpus.size()));
  for (const auto& g : t.gpus) {
    std::string names;
    for (const auto& n : g.os_devices) names += (names.empty() ? "" : ",") + n;
    fmt::format_to(out, "  GPU{:<3} {} {} NUMA {:<2} {}{}\n", g.index,
                   g.pci_busid.empty() ? "(no PCI)    " : g.pci_busid,
                   pci_id(g.vendor_id, g.device_id), g.numa, g.model,
                   names.empty() ? "" : " [" + names + "]");
  }
  fmt::format_to(out, "RDMA NICs  {}\n", t.nics.empty() ? "none" : std::to_string(t.nics.size()));
  for (const auto& n : t.nics) {
    fmt::format_to(out, "  NIC{:<3} {:<14} {:<8} {} {} NUMA {:<2} {}{}\n", n.index, n.name,
                   fabric::to_string(n.kind), n.pci_busid.empty() ? "(no PCI)    " : n.pci_busid,
                   pci_id(n.vendor_id, n.device_id), n.numa, n.model,
                   n.netdev.empty() ? "" : " [" + n.netdev + "]");
  }
  fmt::format_to(out, "Groups     {} (at most {} NIC{} per GPU)\n", t.groups.size(), max_nics,
                 max_nics == 1 ? "" : "s");
  for (std::size_t i = 0; i < t.groups.size(); ++i) {
    const auto& g = t.groups[i];
    std::string nics;
    for (const auto& a : g.nics) {
      nics += fmt::format("{}{} ({})", nics.empty() ? "" : ", ", t.nics.at(a.nic).name,
                          fabric::to_string(a.affinity));
    }
    fmt::format_to(out, "  group {:<2} {:<6} NUMA {:<2} cpus {:<18} core {:<8} NICs: {}\n", i,
                   group_name(g.gpu), g.numa, g.cpus.to_string(), g.core.to_string(),
                   nics.empty() ? "none (software provider)" : nics);
  }
}

void write_domains(Out out, const DomainChoice& d) {
  const auto& c = d.config;
  const std::string what = c.backend == fabric::Backend::verbs
                               ? std::string("verbs backend")
                               : fmt::format("libfabric provider {}", c.provider);
  fmt::format_to(out, "Domains    {}, {} per group{}\n", what, c.domains_per_group,
                 d.picked ? " (picked for these NICs; --provider, --backend, --domains)" : "");
  std::string last_note;
  for (std::size_t i = 0; i < d.groups.size(); ++i) {
    const auto& g = d.groups[i];
    if (!g.ok()) {
      fmt::format_to(out, "  group {:<2} error: {}\n", i, g.status().message());
      continue;
    }
    std::string devices;
    bool named = false;
    for (const auto& n : g->domains) {
      devices += (devices.empty() ? "" : ", ") + n.to_string();
      named = named || !n.device.empty() || !n.address.empty() || !n.requested.empty();
    }
    // Domain i is the i-th name; unnamed Domains all open the provider's default.
    if (!named) devices = "the provider's default";
    fmt::format_to(out, "  group {:<2} {:<6} NUMA {:<2} cpus {:<18} Domains: {}{}\n", i,
                   group_name(g->gpu), g->numa, g->cpus.to_string(), devices,
                   named ? fmt::format(" ({})", fabric::to_string(g->source)) : "");
    if (!g->note.empty() && g->note != last_note) fmt::format_to(out, "           {}\n", g->note);
    last_note = g->note;
  }
}

}  // namespace

std::string text_report(const Report& r) {
  std::string text;
  Out out(text);
  fmt::format_to(out, "fabric-info {}.{}.{}\n\n", fabric::kVersionMajor, fabric::kVersionMinor,
                 fabric::kVersionPatch);
  if (r.topology.ok()) {
    fmt::format_to(out, "Topology of {}\n", r.topology->source);
    write_topology(out, *r.topology, r.max_nics_per_gpu);
    if (r.domains) write_domains(out, *r.domains);
  } else {
    fmt::format_to(out, "Topology   error: {}\n", r.topology.status().to_string());
  }
  fmt::format_to(out, "\nThis host's runtime\n");
  fmt::format_to(out, "Pinning    default {} ({} usable CPUs; off below 4)\n",
                 fabric::to_string(fabric::default_pinning(r.usable_cpus)), r.usable_cpus);
  fmt::format_to(out, "libfabric  {} — providers with RDM + MSG + RMA + >=4 bytes of CQ data:\n",
                 r.providers.libfabric_version);
  if (r.providers.usable.empty()) fmt::format_to(out, "  none\n");
  for (const auto& p : r.providers.usable) {
    fmt::format_to(out, "  {:<16} domain {:<16} cq_data {} B  GPU memory {}{}\n", p.provider,
                   p.domain, p.cq_data_size, p.hmem ? "FI_HMEM" : "no",
                   p.node ? " (asked on " + *p.node + ")" : "");
  }
  for (const auto& p : r.providers.too_little_cq_data) {
    fmt::format_to(out, "  ({} domain {}: only {} B of CQ data, not usable)\n", p.provider,
                   p.domain, p.cq_data_size);
  }
  if (r.verbs.devices.empty()) {
    fmt::format_to(out, "verbs      none ({})\n", r.verbs.note);
  } else {
    fmt::format_to(out, "verbs      {} device{}\n", r.verbs.devices.size(),
                   r.verbs.devices.size() == 1 ? "" : "s");
    for (const auto& d : r.verbs.devices) {
      fmt::format_to(out, "  {:<16} node GUID {:016x}\n", d.name, d.node_guid);
    }
    for (const auto& p : r.verbs.ports) {
      fmt::format_to(out, "  {}:{} {} {} MTU {} {:.1f} Gbit/s  GID[{}] {} ({}){}\n", p.device,
                     p.port, p.active ? "ACTIVE" : "down", p.link_layer, p.active_mtu, p.link_gbps,
                     p.gid_index, p.gid, p.gid_type,
                     p.active && p.gid_index >= 0 ? "  <- usable by the verbs backend" : "");
    }
  }
  if (r.nics) {
    std::string asked;
    for (const auto& n : r.nics->requested) asked += (asked.empty() ? "" : ",") + n;
    fmt::format_to(out, "NICs       per Domain, provider {}, EngineConfig::nics = {}\n",
                   r.nics->provider, asked);
    if (!r.nics->resolved.ok()) {
      fmt::format_to(out, "  error: {}\n", r.nics->resolved.status().message());
    } else {
      for (std::size_t i = 0; i < r.nics->resolved->size(); ++i) {
        fmt::format_to(out, "  Domain {}  {}\n", i, (*r.nics->resolved)[i].to_string());
      }
    }
  }
  fmt::format_to(out, "CUDA       {} ({})\n", r.cuda.present ? "present" : "absent", r.cuda.note);
  fmt::format_to(
      out, "GPU reg    libfabric: FI_HMEM_CUDA where a provider above says FI_HMEM; verbs: {}\n",
      r.cuda.dmabuf_export    ? "dma-buf (ibv_reg_dmabuf_mr), nvidia-peermem as fallback"
      : r.cuda.peermem_module ? "nvidia-peermem (ibv_reg_mr)"
                              : "none (no dma-buf export, no nvidia_peermem)");
  return text;
}

}  // namespace info
