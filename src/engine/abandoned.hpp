#pragma once
// Where a stopped engine leaves a worker thread that is stuck inside a provider call (see
// Worker::stop): the Worker and the callback thread it posts to stay allocated, reachable from
// here, for as long as the process lives, so the thread never touches freed memory once the
// provider lets it go.

#include <chrono>
#include <memory>

#include "engine/callback_thread.hpp"
#include "engine/worker.hpp"

namespace fabric::engine {

void abandon(std::unique_ptr<Worker> worker, std::unique_ptr<CallbackThread> callbacks);

// Waits (at most `timeout`) until every abandoned worker thread has ended; for tests and for
// an orderly exit. true when none is left running.
bool wait_for_abandoned_workers(std::chrono::milliseconds timeout);

}  // namespace fabric::engine
