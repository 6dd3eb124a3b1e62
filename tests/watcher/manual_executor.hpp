#pragma once
// An executor the test drives by hand: deliveries wait in a list until the
// test runs them, which makes "a change is pending" a state, not a race.

#include <functional>
#include <mutex>
#include <vector>

#include "watcher/watcher_options.hpp"

namespace fabric::watcher::testing {

class ManualExecutor {
 public:
  Executor executor() {
    return [this](std::function<void()> task) {
      std::lock_guard lock(mutex_);
      tasks_.push_back(std::move(task));
    };
  }
  std::size_t pending() {
    std::lock_guard lock(mutex_);
    return tasks_.size();
  }
  // Runs what is queued now; returns how many ran.
  std::size_t run_all() {
    std::vector<std::function<void()>> batch;
    {
      std::lock_guard lock(mutex_);
      batch.swap(tasks_);
    }
    for (auto& t : batch) t();
    return batch.size();
  }

 private:
  std::mutex mutex_;
  std::vector<std::function<void()>> tasks_;
};

}  // namespace fabric::watcher::testing
