// Worker::assist: a waiting caller runs the worker's loop itself.
//
// An immediate ping-pong through the worker thread hands off between threads four times per
// round trip (caller -> worker, worker -> peer's worker, and back). Where the CPUs are shared,
// each hand-off is a context switch (2.5-3.3 us each on the 2-core bench box, against a 2 us
// raw round trip), so a caller that waits for an immediate does better to post and poll on its
// own thread. Tasks (registration, expectations) stay on the worker thread: they may need its
// pinning or a device context.

#include <mutex>

#include "engine/worker.hpp"

namespace fabric::engine {

bool Worker::assist() {
  std::unique_lock loop(loop_mutex_, std::try_to_lock);
  if (!loop || stop_requested_.load(std::memory_order_seq_cst)) return false;
  bool busy = drain_submissions();
  busy |= progress_pending();
  busy |= poll_domains();
  return busy;
}

}  // namespace fabric::engine
