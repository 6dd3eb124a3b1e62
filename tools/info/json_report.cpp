#include <fmt/format.h>

#include <fabric/version.hpp>

#include "report.hpp"

namespace info {

namespace {

using json = nlohmann::ordered_json;

json topology_json(const fabric::Topology& t) {
  json numa = json::array();
  for (const auto& n : t.numa) {
    numa.push_back({{"os_index", n.os_index},
                    {"package", n.package},
                    {"cpus", n.cpus.to_string()},
                    {"cores", n.cores.size()},
                    {"memory_bytes", n.memory_bytes}});
  }
  json gpus = json::array();
  for (const auto& g : t.gpus) {
    gpus.push_back({{"index", g.index},
                    {"pci_busid", g.pci_busid},
                    {"pci_id", fmt::format("{:04x}:{:04x}", g.vendor_id, g.device_id)},
                    {"model", g.model},
                    {"os_devices", g.os_devices},
                    {"numa", g.numa},
                    {"package", g.package}});
  }
  json nics = json::array();
  for (const auto& n : t.nics) {
    nics.push_back({{"index", n.index},
                    {"name", n.name},
                    {"kind", fabric::to_string(n.kind)},
                    {"pci_busid", n.pci_busid},
                    {"pci_id", fmt::format("{:04x}:{:04x}", n.vendor_id, n.device_id)},
                    {"model", n.model},
                    {"netdev", n.netdev},
                    {"numa", n.numa},
                    {"package", n.package}});
  }
  json groups = json::array();
  for (const auto& g : t.groups) {
    json assigned = json::array();
    for (const auto& a : g.nics) {
      assigned.push_back({{"nic", a.nic},
                          {"name", t.nics.at(a.nic).name},
                          {"affinity", fabric::to_string(a.affinity)}});
    }
    groups.push_back({{"gpu", g.gpu < 0 ? json(nullptr) : json(g.gpu)},
                      {"numa", g.numa},
                      {"cpus", g.cpus.to_string()},
                      {"core", g.core.to_string()},
                      {"nics", assigned}});
  }
  return {{"source", t.source}, {"cpus", t.cpus.to_string()},
          {"cores", t.cores},   {"numa", numa},
          {"gpus", gpus},       {"nics", nics},
          {"groups", groups}};
}

json provider_json(const ProviderEntry& p) {
  return {{"provider", p.provider},
          {"domain", p.domain},
          {"fabric", p.fabric},
          {"cq_data_size", p.cq_data_size},
          {"node", p.node ? json(*p.node) : json(nullptr)},
          {"hmem", p.hmem}};
}

json domains_json(const DomainChoice& d) {
  json groups = json::array();
  for (const auto& g : d.groups) {
    if (!g.ok()) {
      groups.push_back({{"error", g.status().message()}});
      continue;
    }
    json domains = json::array();
    for (const auto& n : g->domains) {
      domains.push_back({{"device", n.device},
                         {"interface", n.interface},
                         {"address", n.address},
                         {"requested", n.requested},
                         {"topology_nic", n.topology_nic < 0 ? json(nullptr) : json(n.topology_nic)}});
    }
    groups.push_back({{"gpu", g->gpu < 0 ? json(nullptr) : json(g->gpu)},
                      {"numa", g->numa},
                      {"cpus", g->cpus.to_string()},
                      {"source", fabric::to_string(g->source)},
                      {"note", g->note},
                      {"domains", domains}});
  }
  const bool verbs = d.config.backend == fabric::Backend::verbs;
  return {{"backend", verbs ? "verbs" : "libfabric"},
          {"provider", verbs ? json(nullptr) : json(d.config.provider)},
          {"domains_per_group", d.config.domains_per_group},
          {"picked", d.picked},
          {"groups", groups}};
}

}  // namespace

json to_json(const Report& r) {
  json doc;
  doc["fabric_lib_version"] =
      fmt::format("{}.{}.{}", fabric::kVersionMajor, fabric::kVersionMinor, fabric::kVersionPatch);
  doc["max_nics_per_gpu"] = r.max_nics_per_gpu;
  if (r.topology.ok()) {
    doc["topology"] = topology_json(*r.topology);
    if (r.domains) doc["domains"] = domains_json(*r.domains);
  } else {
    doc["topology"] = {{"error", r.topology.status().to_string()}};
  }
  doc["pinning"] = {{"default", fabric::to_string(fabric::default_pinning(r.usable_cpus))},
                    {"usable_cpus", r.usable_cpus}};
  json usable = json::array();
  for (const auto& p : r.providers.usable) usable.push_back(provider_json(p));
  json rejected = json::array();
  for (const auto& p : r.providers.too_little_cq_data) rejected.push_back(provider_json(p));
  doc["libfabric"] = {{"version", r.providers.libfabric_version},
                      {"providers", usable},
                      {"too_little_cq_data", rejected}};
  json devices = json::array();
  for (const auto& d : r.verbs.devices) {
    devices.push_back({{"name", d.name}, {"node_guid", fmt::format("{:016x}", d.node_guid)}});
  }
  json ports = json::array();
  for (const auto& p : r.verbs.ports) {
    ports.push_back({{"device", p.device}, {"port", p.port}, {"active", p.active},
                     {"link_layer", p.link_layer}, {"active_mtu", p.active_mtu},
                     {"link_gbps", p.link_gbps}, {"gid_index", p.gid_index}, {"gid", p.gid},
                     {"gid_type", p.gid_type}});
  }
  doc["verbs"] = {{"library", r.verbs.library}, {"devices", devices}, {"ports", ports},
                  {"note", r.verbs.note}};
  doc["cuda"] = {{"driver", r.cuda.present ? "present" : "absent"},
                 {"note", r.cuda.note},
                 {"dmabuf_export", r.cuda.dmabuf_export},
                 {"nvidia_peermem", r.cuda.peermem_module}};
  if (r.nics) {
    nlohmann::ordered_json nics = {{"provider", r.nics->provider},
                                   {"requested", r.nics->requested}};
    if (r.nics->resolved.ok()) {
      nlohmann::ordered_json domains = nlohmann::ordered_json::array();
      for (const auto& n : *r.nics->resolved) {
        domains.push_back({{"requested", n.requested},
                           {"interface", n.interface},
                           {"address", n.address},
                           {"device", n.device}});
      }
      nics["domains"] = domains;
    } else {
      nics["error"] = r.nics->resolved.status().message();
    }
    doc["nics"] = nics;
  }
  return doc;
}

}  // namespace info
