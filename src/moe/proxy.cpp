#include "fabric/moe/proxy.hpp"

#include <chrono>

namespace fabric::moe {

Proxy::Proxy(MoeGroup& group) : group_(group), thread_([this] { run(); }) {}

Proxy::~Proxy() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
}

void Proxy::signal(ProxyStep step) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(step);
  }
  work_.notify_one();
}

Result<Watcher> Proxy::watch(TransferEngine& engine, WatcherMemory memory) {
  return engine.alloc_uvm_watcher(
      [this](std::uint64_t, std::uint64_t now) {
        // Replay every step between the last one handled and this value
        // (the first is epoch 1, step 0 = 4).
        for (std::uint64_t v = watched_ + 1; v <= now; ++v) signal(static_cast<ProxyStep>(v % 4));
        if (now > watched_) watched_ = now;
        return true;
      },
      memory);
}

void Proxy::run() {
  for (;;) {
    ProxyStep step;
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      step = queue_.front();
      queue_.pop_front();
    }
    execute(step);
  }
}

void Proxy::execute(ProxyStep step) {
  Status st;
  int milestone = -1;
  switch (step) {
    case ProxyStep::private_staged:
      st = group_.post_private();
      break;
    case ProxyStep::all_staged:
      st = group_.mark_staged();
      if (st.ok()) st = group_.complete_dispatch().status();
      milestone = dispatched;
      break;
    case ProxyStep::rows_gathered:
      st = group_.post_combine();
      if (st.ok()) st = group_.push_combine_direct();
      if (st.ok()) st = group_.mark_combine_pushed();
      if (st.ok()) st = group_.await_combine();
      milestone = combined;
      break;
    case ProxyStep::rows_consumed:
      st = group_.finish_combine();
      milestone = idle;
      break;
  }
  {
    std::lock_guard lock(mutex_);
    if (!st.ok() && error_.ok()) error_ = st;
    if (st.ok() && milestone >= 0) reached_[milestone] = group_.epoch();
  }
  progress_.notify_all();
}

Status Proxy::wait_for(Milestone m) {
  const auto bound = 3 * group_.config().timeout;
  std::unique_lock lock(mutex_);
  const std::uint32_t epoch = group_.epoch();
  if (!progress_.wait_for(lock, bound, [&] { return !error_.ok() || reached_[m] >= epoch; }))
    return {Errc::timeout, "moe proxy: step not done within " +
                               std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(bound).count()) +
                               " ms (was the device's signal sent?)"};
  return error_;
}

Status Proxy::wait_dispatched() { return wait_for(dispatched); }
Status Proxy::wait_combined() { return wait_for(combined); }
Status Proxy::wait_idle() {
  if (group_.epoch() == 0) return Status::success();
  return wait_for(idle);
}

}  // namespace fabric::moe
