#include "mailbox.hpp"

namespace demo {

void Mailbox::push(nlohmann::json event) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  ready_.notify_one();
}

std::optional<nlohmann::json> Mailbox::pop(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [this] { return !events_.empty(); })) return std::nullopt;
  nlohmann::json event = std::move(events_.front());
  events_.pop_front();
  return event;
}

}  // namespace demo
