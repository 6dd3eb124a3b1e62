#pragma once
// One rank's side of a multi-process MoE run: build the group through the
// parent's relay, run iterations of dispatch + expert + combine on the host
// device, and check every result against the dense reference.

#include <cstdint>
#include <string>

#include "fabric/moe/config.hpp"
#include "fabric/moe/host_device.hpp"
#include "fabric_test/channel.hpp"
#include "workload.hpp"

namespace fabric::moe::test {

struct Scenario {
  MoeConfig config;  // rank is filled in per process
  Routing routing = Routing::uniform;
  std::uint32_t iterations = 10;
  std::uint64_t seed = 1;
  std::string provider = "shm";
  // Who runs the engine-side steps: the device itself, a proxy thread, or a
  // proxy thread signalled through a watched word (as a GPU kernel would).
  ProxyMode proxy = ProxyMode::inline_steps;
  // Check the dispatch output against the reference every this many
  // iterations (combine is checked every iteration; it covers dispatch too).
  std::uint32_t check_dispatch_every = 1;
  // Failure injection: this rank SIGKILLs itself at the start of iteration
  // `die_at` (counting from 0), once nothing of its own is in flight
  // (scenario.cpp says why); the others must name it, then
  // rebuild without it and run `iterations_after_rebuild` more.
  std::int32_t victim = -1;
  std::uint32_t die_at = 0;
  std::uint32_t iterations_after_rebuild = 0;
};

// Exit code kChildOk when every check held; the report line (sent to the
// parent) carries the stats, or the failure.
int run_scenario_rank(const Scenario& scenario, std::uint32_t rank, fabric::test::Channel& channel);

// Parses "key=value" out of a report line; -1 when absent.
long long report_value(const std::string& report, const std::string& key);

}  // namespace fabric::moe::test
