#pragma once
// Hands events from engine threads (receive and imm callbacks) to the role's
// main thread, which is the only one that acts on them.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>

namespace demo {

class Mailbox {
 public:
  void push(nlohmann::json event);
  // The oldest event, or nullopt once `timeout` passes without one.
  std::optional<nlohmann::json> pop(std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<nlohmann::json> events_;
};

}  // namespace demo
