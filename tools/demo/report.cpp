#include "report.hpp"

#include <fstream>
#include <thread>
#include <unistd.h>

#include <fabric/version.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "common/stats.hpp"
#include "demo_error.hpp"

namespace demo {

Machine describe_machine(const std::string& provider, const std::string& backend) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return {host, std::thread::hardware_concurrency(), provider, backend,
          fmt::format("{}.{}.{}", fabric::kVersionMajor, fabric::kVersionMinor,
                      fabric::kVersionPatch)};
}

void print_header() {
  fmt::print("{:<13} {:>9} {:>6} {:>10} {:>12} {:>12} {:>12} {:>9}\n", "op", "size", "count",
             "requests", "Gbit/s", "req/s", "writes/s", "verified");
  std::fflush(stdout);
}

void print_row(const Measurement& m) {
  fmt::print("{:<13} {:>9} {:>6} {:>10} {:>12.2f} {:>12.0f} {:>12.0f} {:>9}\n",
             op_name(m.workload.op), tools::human_bytes(m.workload.size), m.workload.count,
             m.iterations, m.gbps(), m.requests_per_s(), m.writes_per_s(),
             m.verified ? "yes" : "NO");
  std::fflush(stdout);
}

void write_json(const std::string& path, const Machine& machine,
                const std::vector<Measurement>& results) {
  nlohmann::json doc;
  doc["machine"] = {{"hostname", machine.hostname},
                    {"cpus", machine.cpus},
                    {"provider", machine.provider},
                    {"backend", machine.backend},
                    {"fabric_lib_version", machine.version}};
  doc["results"] = nlohmann::json::array();
  for (const Measurement& m : results) {
    doc["results"].push_back({{"op", op_name(m.workload.op)},
                              {"provider", machine.provider},
                              {"backend", machine.backend},
                              {"size", m.workload.size},
                              {"count", m.workload.count},
                              {"iterations", m.iterations},
                              {"bytes", m.bytes()},
                              {"seconds", m.seconds},
                              {"engine_gbps", m.gbps()},
                              {"ops_per_s", m.requests_per_s()},
                              {"writes_per_s", m.writes_per_s()},
                              {"verified", m.verified}});
  }
  std::ofstream out(path);
  out << doc.dump(2) << '\n';
  out.close();
  if (!out) throw DemoError("cannot write " + path);
}

}  // namespace demo
