// fabric-latency: immediate round trips between two processes for each
// worker idle policy, hot (back to back) and after an idle gap. It measures
// what the idle back-off (spin → yield → sleep) costs a peer in latency.

#include <CLI/CLI.hpp>
#include <cmath>
#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "fabric/version.hpp"
#include "ping_pong.hpp"

using fabric::latency::Policy;
using fabric::latency::RunSpec;

int main(int argc, char** argv) {
  CLI::App app{"fabric-latency: immediate ping-pong per worker idle policy"};
  std::string provider = "shm";
  std::uint32_t iterations = 2000;
  std::uint32_t gap_us = 2000;
  std::string json_path;
  app.add_option("--provider", provider, "shm, tcp, sockets, ...");
  app.add_option("--iterations", iterations, "round trips per policy and scenario");
  app.add_option("--gap-us", gap_us, "pause before each ping in the idle scenario");
  app.add_option("--json", json_path, "write the results here");
  CLI11_PARSE(app, argc, argv);

  // IP providers stay on loopback whatever the environment says.
  ::setenv("FI_TCP_IFACE", "lo", 1);
  ::setenv("FI_SOCKETS_IFACE", "lo", 1);

  const std::vector<Policy> policies = {
      {"busy_poll", true},
      {"default", false},
      // The default before idle_spin became 0: a pure spin for 50 us after each piece of work.
      {"spin_50us", false, std::chrono::microseconds(50)},
      {"sleep_early", false, std::chrono::microseconds(0), std::chrono::microseconds(0),
       std::chrono::microseconds(200)},
  };
  nlohmann::json results = nlohmann::json::array();
  fmt::print("provider {}  iterations {}  idle gap {} us  ({} cpus)\n", provider, iterations,
             gap_us, std::thread::hardware_concurrency());
  // Round trips: an immediate WRITE there, one back; "-": too few samples.
  fmt::print("round-trip times (imm there and back), us\n");
  fmt::print("{:<12} {:<6} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "policy", "case", "rtt p50",
             "rtt p90", "rtt p99", "rtt p99.9", "rtt max");
  const auto cell = [](double v) {
    return std::isnan(v) ? std::string("-") : fmt::format("{:.1f}", v);
  };
  try {
    for (const Policy& policy : policies) {
      for (const bool idle : {false, true}) {
        RunSpec spec{provider, policy, idle ? std::max(iterations / 10, 20u) : iterations,
                     std::chrono::microseconds(idle ? gap_us : 0)};
        const auto p = fabric::latency::run_ping_pong(spec);
        const char* scenario = idle ? "idle" : "hot";
        fmt::print("{:<12} {:<6} {:>9} {:>9} {:>9} {:>9} {:>9}\n", policy.name, scenario,
                   cell(p.p50_us), cell(p.p90_us), cell(p.p99_us), cell(p.p999_us), cell(p.max_us));
        results.push_back({{"op", "imm_rtt"},
                           {"provider", provider},
                           {"backend", "libfabric"},
                           {"policy", policy.name},
                           {"scenario", scenario},
                           {"iterations", spec.iterations},
                           {"gap_us", spec.gap.count()},
                           {"p50_us", p.p50_us},
                           {"p90_us", p.p90_us},
                           {"p99_us", p.p99_us},
                           {"p999_us", p.p999_us},
                           {"max_us", p.max_us}});
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "fabric-latency: {}\n", e.what());
    return 1;
  }
  if (!json_path.empty()) {
    nlohmann::json doc = {
        {"machine",
         {{"cpus", std::thread::hardware_concurrency()},
          {"fabric_lib_version", fmt::format("{}.{}.{}", fabric::kVersionMajor,
                                             fabric::kVersionMinor, fabric::kVersionPatch)}}},
        {"results", results}};
    std::ofstream(json_path) << doc.dump(2) << "\n";
  }
  return 0;
}
