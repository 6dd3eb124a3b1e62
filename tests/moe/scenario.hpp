#pragma once
// One rank's side of a multi-process MoE run: build the group through the
// parent's relay, run iterations of dispatch + expert + combine on the host
// device, and check every result against the dense reference.

#include <cstdint>
#include <optional>
#include <string>

#include "fabric/engine.hpp"
#include "fabric/moe/config.hpp"
#include "fabric/moe/group.hpp"
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
  // The survivors rebuild on the engine they already hold, as a process serving other
  // workloads on it must (not on shm: it wedges after a death, docs/reliability.md).
  bool rebuild_on_same_engine = false;
};

struct Failure {
  std::string text;
  long long ms_into_iteration = -1;  // from the start of the failing iteration
};

// Runs `iterations` (numbered from first_iteration) on a group of `config` on the host device,
// each checked against the reference; the first failure is returned. Rank die_rank SIGKILLs
// itself, once idle, at the start of iteration die_at (-1: nobody). Without quiesce, the last
// iteration's barrier is not awaited nor strays checked: for a rank leaving the group while
// the others go on (their next iteration may be arriving).
std::optional<Failure> run_iterations(MoeGroup& group, TransferEngine& engine, const Scenario& sc,
                                      const MoeConfig& config, std::uint32_t first_iteration,
                                      std::uint32_t iterations, std::int32_t die_rank,
                                      std::uint32_t die_at, bool quiesce = true);

// Exit code kChildOk when every check held; the report line (sent to the
// parent) carries the stats, or the failure.
int run_scenario_rank(const Scenario& scenario, std::uint32_t rank, fabric::test::Channel& channel);

// Parses "key=value" out of a report line; -1 when absent.
long long report_value(const std::string& report, const std::string& key);

}  // namespace fabric::moe::test
