#pragma once
// Where a stopped engine leaves worker threads that are stuck inside a provider call (see
// Worker::stop): the Workers and what they share (the callback thread they post to, the
// immediate table) stay allocated, reachable from here, for as long as the process lives, so a
// thread never touches freed memory once the provider lets it go.

#include <chrono>
#include <memory>
#include <vector>

#include "engine/engine_shared.hpp"
#include "engine/worker.hpp"

namespace fabric::engine {

void abandon(std::vector<std::unique_ptr<Worker>> workers, std::shared_ptr<EngineShared> shared);

// Waits (at most `timeout`) until every abandoned worker thread has ended; for tests and for
// an orderly exit. true when none is left running.
bool wait_for_abandoned_workers(std::chrono::milliseconds timeout);

}  // namespace fabric::engine
