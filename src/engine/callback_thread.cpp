#include "engine/callback_thread.hpp"

#include <chrono>
#include <exception>

#include "common/log.hpp"

namespace fabric::engine {

CallbackThread::CallbackThread() : thread_([this] { run(); }) {}

CallbackThread::~CallbackThread() { stop(); }

void CallbackThread::post(Task task) { tasks_.enqueue(std::move(task)); }

void CallbackThread::stop() {
  stopping_.store(true, std::memory_order_release);
  // An empty task wakes the thread at once instead of after its wait timeout.
  tasks_.enqueue(Task{});
  if (thread_.joinable() && !on_this_thread()) thread_.join();
}

bool CallbackThread::on_this_thread() const noexcept {
  return std::this_thread::get_id() == thread_.get_id();
}

void CallbackThread::run() {
  Task task;
  for (;;) {
    if (tasks_.wait_dequeue_timed(task, std::chrono::milliseconds(100))) {
      if (!task) {
        if (stopping_.load(std::memory_order_acquire) && tasks_.size_approx() == 0) return;
        continue;
      }
      try {
        task();
      } catch (const std::exception& e) {
        log::error("a user callback threw: {}", e.what());
      } catch (...) {
        log::error("a user callback threw a non-standard exception");
      }
      task = nullptr;
      continue;
    }
    if (stopping_.load(std::memory_order_acquire) && tasks_.size_approx() == 0) return;
  }
}

}  // namespace fabric::engine
