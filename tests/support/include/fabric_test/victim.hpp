#pragma once
// Engine settings for a test process that will be stopped or killed on purpose.

#include "fabric/engine.hpp"

namespace fabric::test {

// libfabric 1.17's shm guards each endpoint's region with a process-shared spinlock that its
// owner takes in every poll and a writer takes while posting into it; a process stopped or
// killed while holding one stalls its peers for as long as it stays stopped, or for good
// (docs/reliability.md#shm-locks). A victim that polls rarely while idle (no spin, a 20 ms sleep
// between polls) is almost never inside a poll when the signal lands, so the test sees the
// engine's behaviour rather than that lock. Other providers are returned unchanged.
[[nodiscard]] EngineConfig victim_config(EngineConfig config);

}  // namespace fabric::test
