// Worker::assist: a waiting caller runs the worker's loop itself.
//
// An immediate ping-pong through the worker threads hands off between threads four times per
// round trip (caller -> worker and peer worker -> peer caller, each way). Where the CPUs are shared,
// each hand-off is a context switch (2.5-3.3 us each on the 2-core bench box, against a 2 us
// raw round trip), so a caller that waits for an immediate does better to post and poll on its
// own thread. Tasks (registration, expectations) stay on the worker thread: they may need its
// pinning or a device context.

#include <mutex>
#include <thread>

#include "engine/worker.hpp"

namespace fabric::engine {

bool Worker::worker_needs_pass() const {
  // Tasks and request expiry run only on the worker thread.
  return worker_wants_loop_.load(std::memory_order_relaxed) || tasks_.size_approx() != 0;
}

std::unique_lock<std::mutex> Worker::try_caller_pass() {
  std::unique_lock loop(loop_mutex_, std::try_to_lock);
  if (loop && stop_requested_.load(std::memory_order_seq_cst)) loop.unlock();
  return loop;
}

bool Worker::assist() {
  if (worker_needs_pass()) {
    std::this_thread::yield();  // give it the next pass, and this CPU, which it may share
    return false;
  }
  const auto loop = try_caller_pass();
  if (!loop) return false;
  bool busy = post_pass();
  busy |= poll_domains();
  return busy;
}

bool Worker::post_submitted() {
  // As assist(), but only the first WRITE of what is queued: the caller pays one provider call,
  // not a whole paged write, and polls nothing (completions stay on the worker's threads).
  if (worker_needs_pass()) return false;
  const auto loop = try_caller_pass();
  // Behind a queue cut short by its slice, newcomers wait for the worker's next pass.
  if (!loop || posting_backlog_) return false;
  slice_.start(std::chrono::steady_clock::now());
  if (!drain_submissions(1)) return false;
  // Before the caller's wake(): a worker about to sleep sees this or is woken.
  posted_by_caller_.store(true, std::memory_order_seq_cst);
  return true;
}

}  // namespace fabric::engine
