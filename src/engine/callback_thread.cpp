#include "engine/callback_thread.hpp"

#include <chrono>
#include <exception>

#include "common/log.hpp"
#include "fabric/threads.hpp"

namespace fabric::engine {

CallbackThread::CallbackThread(CpuSet cpus)
    : thread_([this, cpus = std::move(cpus)] { run(cpus); }) {}

CallbackThread::~CallbackThread() { stop(); }

void CallbackThread::post(Task task) { tasks_.enqueue(Job{std::move(task), {}, {}, false}); }

void CallbackThread::post_completion(OnDone done, Status status) {
  tasks_.enqueue(Job{{}, std::move(done), std::move(status), true});
}

void CallbackThread::stop() {
  stopping_.store(true, std::memory_order_release);
  // An empty task wakes the thread at once instead of after its wait timeout.
  tasks_.enqueue(Job{});
  if (thread_.joinable() && !on_this_thread()) thread_.join();
}

bool CallbackThread::on_this_thread() const noexcept {
  return std::this_thread::get_id() == thread_.get_id();
}

void CallbackThread::run(const CpuSet& cpus) {
  const PlacedThread placed("fabric-cb", cpus);
  Job job;
  for (;;) {
    if (tasks_.wait_dequeue_timed(job, std::chrono::milliseconds(100))) {
      if (!job.task && !job.completion) {
        if (stopping_.load(std::memory_order_acquire) && tasks_.size_approx() == 0) return;
        continue;
      }
      try {
        if (job.completion) {
          job.done.deliver(job.status);
        } else {
          job.task();
        }
      } catch (const std::exception& e) {
        log::error("a user callback threw: {}", e.what());
      } catch (...) {
        log::error("a user callback threw a non-standard exception");
      }
      job = Job{};  // drop the callback's captures now, not at the next job
      continue;
    }
    if (stopping_.load(std::memory_order_acquire) && tasks_.size_approx() == 0) return;
  }
}

}  // namespace fabric::engine
