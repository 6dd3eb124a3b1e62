#include <gtest/gtest.h>
#include <sched.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fabric/engine.hpp"

namespace fabric {
namespace {

// Threads of this process whose allowed CPU list is exactly `list`.
int threads_allowed_on(const std::string& list) {
  int n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) {
        if (line.substr(line.find_first_not_of(" \t", 18)) == list) ++n;
      }
    }
  }
  return n;
}

TEST(EnginePinning, CorePinningRestrictsTheWorkerToItsGroupsCore) {
  auto topo = detect_topology(TopologyOptions{});
  ASSERT_TRUE(topo.ok()) << topo.status().to_string();
  const CpuSet cpus = worker_cpus(topo->groups.front(), Pinning::core);
  ASSERT_EQ(cpus.cpus.size(), 1u);
  const std::string list = std::to_string(cpus.cpus.front());
  const int before = threads_allowed_on(list);

  EngineConfig config;
  config.pinning = Pinning::core;
  auto engine = TransferEngine::create(config);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  // The worker pins itself as it starts; a bounded poll of /proc sees it.
  bool pinned = false;
  for (int i = 0; i < 2000 && !pinned; ++i) {
    pinned = threads_allowed_on(list) > before;
    if (!pinned) sched_yield();
  }
  EXPECT_TRUE(pinned) << "no engine thread restricted to CPU " << list;
}

}  // namespace
}  // namespace fabric
