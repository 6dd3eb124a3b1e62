#pragma once
// The one thread that runs user callbacks, so a slow callback never stalls a worker.

#include <concurrentqueue/blockingconcurrentqueue.h>

#include <atomic>
#include <functional>
#include <thread>

#include "fabric/completion.hpp"
#include "fabric/status.hpp"
#include "fabric/topology.hpp"

namespace fabric::engine {

class CallbackThread {
 public:
  using Task = std::function<void()>;

  // The thread runs on `cpus` (empty: wherever it was created), named fabric-cb.
  explicit CallbackThread(CpuSet cpus = {});
  ~CallbackThread();  // stop()s
  CallbackThread(const CallbackThread&) = delete;
  CallbackThread& operator=(const CallbackThread&) = delete;

  void post(Task task);
  // Runs done.deliver(status): a record in the queue instead of a closure, so handing a
  // request's completion over allocates nothing.
  void post_completion(OnDone done, Status status);
  // Runs everything already posted, then joins. Idempotent.
  void stop();
  [[nodiscard]] bool on_this_thread() const noexcept;

 private:
  void run(const CpuSet& cpus);

  // Either a task or a completion; an empty job (neither) wakes the thread for stop().
  struct Job {
    Task task;
    OnDone done;
    Status status;
    bool completion = false;
  };
  moodycamel::BlockingConcurrentQueue<Job> tasks_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace fabric::engine
