#include "engine/abandoned.hpp"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace fabric::engine {

namespace {
struct Abandoned {
  std::vector<std::unique_ptr<Worker>> workers;
  std::shared_ptr<EngineShared> shared;
};

struct Graveyard {
  std::mutex mutex;
  std::vector<Abandoned> entries;
};

// Never destroyed: a thread still running at exit may reach it.
Graveyard& graveyard() {
  static auto* g = new Graveyard;
  return *g;
}
}  // namespace

void abandon(std::vector<std::unique_ptr<Worker>> workers, std::shared_ptr<EngineShared> shared) {
  auto& g = graveyard();
  std::lock_guard lock(g.mutex);
  g.entries.push_back({std::move(workers), std::move(shared)});
}

bool wait_for_abandoned_workers(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto& g = graveyard();
  std::lock_guard lock(g.mutex);
  for (auto& entry : g.entries) {
    for (auto& worker : entry.workers) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (!worker->wait_thread_ended(std::max(left, std::chrono::milliseconds(0)))) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace fabric::engine
