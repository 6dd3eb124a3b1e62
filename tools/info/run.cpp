// fabric-info's options and report (run.hpp). Read-only: opens no endpoint.

#include "run.hpp"

#include <CLI/CLI.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "report.hpp"

namespace info {

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
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
  std::optional<std::string> provider;
  std::optional<fabric::Backend> backend;
  std::optional<int> domains;
  app.add_option("--nics", nics,
                 "show which interface/address/device each Domain would get for these "
                 "EngineConfig::nics entries (one per Domain), e.g. nic0,nic1")
      ->delimiter(',');
  app.add_option("--provider", provider,
                 "the libfabric provider Domains are chosen for (default: efa for EFA NICs, "
                 "the verbs backend for other RDMA NICs, shm without NICs; tcp with --nics)");
  app.add_option("--backend", backend, "libfabric or verbs")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, fabric::Backend>{{"libfabric", fabric::Backend::libfabric},
                                                 {"verbs", fabric::Backend::verbs}}));
  app.add_option("--domains", domains,
                 "Domains per group (EngineConfig::domains_per_group; default: the plan's NICs "
                 "per group)")
      ->check(CLI::Range(1, 4));
  std::vector<const char*> argv;
  for (const auto& arg : args) argv.push_back(arg.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err);
  }

  Report report;
  report.max_nics_per_gpu = max_nics;
  fabric::TopologyOptions options;
  options.xml_path = xml;
  options.max_nics_per_gpu = max_nics;
  report.topology = fabric::detect_topology(options);
  if (auto mine = fabric::current_thread_affinity(); mine.ok()) report.usable_cpus = mine->size();
  report.providers = scan_providers();
  report.verbs = scan_verbs();
  report.cuda = probe_cuda();
  if (report.topology.ok()) {
    report.domains = choose_domains(
        *report.topology, {provider, backend, domains, nics, /*live=*/!xml.has_value()});
  }
  if (!nics.empty()) {
    fabric::EngineConfig config;
    config.backend = backend.value_or(fabric::Backend::libfabric);
    config.provider = provider.value_or("tcp");
    config.nics = nics;
    config.domains_per_group = static_cast<std::uint32_t>(nics.size());
    report.nics = NicChoice{config.provider, nics, fabric::resolve_domain_nics(config)};
  }

  if (json) {
    out << to_json(report).dump(2) << '\n';
  } else {
    out << text_report(report);
  }
  if (report.nics && !report.nics->resolved.ok()) {
    err << "fabric-info: --nics: " << report.nics->resolved.status().to_string() << '\n';
    return 1;
  }
  if (!report.topology.ok()) {
    err << "fabric-info: " << report.topology.status().to_string() << '\n';
    return 1;
  }
  return 0;
}

}  // namespace info
