// fabric-info: what fabric-lib would find and use on this host (or on the
// machine an hwloc XML file describes). Read-only: opens no endpoint.

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>

#include "report.hpp"

int main(int argc, char** argv) {
  std::optional<std::string> xml;
  bool json = false;
  int max_nics = 4;
  CLI::App app{
      "fabric-info: GPUs, RDMA NICs and NUMA nodes found, the NICs and cores each "
      "DomainGroup would use, and the usable libfabric providers"};
  app.add_option("--xml", xml, "read the topology from this hwloc XML file (lstopo --of xml)")
      ->check(CLI::ExistingFile);
  app.add_option("--max-nics", max_nics, "NICs per GPU group, 1-4")
      ->check(CLI::Range(1, 4))
      ->capture_default_str();
  app.add_flag("--json", json, "print JSON instead of text");
  std::vector<std::string> nics;
  std::string provider = "tcp";
  app.add_option("--nics", nics,
                 "show which interface/address/device each Domain would get for these "
                 "EngineConfig::nics entries (one per Domain), e.g. nic0,nic1")
      ->delimiter(',');
  app.add_option("--provider", provider, "the provider --nics is resolved for")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  info::Report report;
  report.max_nics_per_gpu = max_nics;
  fabric::TopologyOptions options;
  options.xml_path = xml;
  options.max_nics_per_gpu = max_nics;
  report.topology = fabric::detect_topology(options);
  if (auto mine = fabric::current_thread_affinity(); mine.ok()) report.usable_cpus = mine->size();
  report.providers = info::scan_providers();
  report.verbs = info::scan_verbs();
  report.cuda = info::probe_cuda();
  if (!nics.empty()) {
    fabric::EngineConfig config;
    config.provider = provider;
    config.nics = nics;
    config.domains_per_group = static_cast<std::uint32_t>(nics.size());
    report.nics = info::NicChoice{provider, nics, fabric::resolve_domain_nics(config)};
  }

  if (json) {
    fmt::print("{}\n", info::to_json(report).dump(2));
  } else {
    info::print_text(report);
  }
  if (report.nics && !report.nics->resolved.ok()) {
    fmt::print(stderr, "fabric-info: --nics: {}\n", report.nics->resolved.status().to_string());
    return 1;
  }
  if (!report.topology.ok()) {
    fmt::print(stderr, "fabric-info: {}\n", report.topology.status().to_string());
    return 1;
  }
  return 0;
}
