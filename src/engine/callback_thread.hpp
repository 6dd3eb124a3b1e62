#pragma once
// The one thread that runs user callbacks, so a slow callback never stalls a worker.

#include <concurrentqueue/blockingconcurrentqueue.h>

#include <atomic>
#include <functional>
#include <thread>

namespace fabric::engine {

class CallbackThread {
 public:
  using Task = std::function<void()>;

  CallbackThread();
  ~CallbackThread();  // stop()s
  CallbackThread(const CallbackThread&) = delete;
  CallbackThread& operator=(const CallbackThread&) = delete;

  void post(Task task);
  // Runs everything already posted, then joins. Idempotent.
  void stop();
  [[nodiscard]] bool on_this_thread() const noexcept;

 private:
  void run();

  moodycamel::BlockingConcurrentQueue<Task> tasks_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace fabric::engine
