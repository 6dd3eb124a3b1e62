#pragma once
// A KV request's lifecycle, as SGLang's KVPoll: waiting -> transferring -> done | failed |
// cancelled. A terminal state is reported only once no byte of the request can still land in
// the decoder's pages (docs/kv.md#states).

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "fabric/status.hpp"

namespace fabric::kv {

enum class State : std::uint8_t { waiting, transferring, done, failed, cancelled };

[[nodiscard]] std::string_view state_name(State state) noexcept;
[[nodiscard]] constexpr bool is_terminal(State s) noexcept {
  return s == State::done || s == State::failed || s == State::cancelled;
}

struct RequestStatus {
  State state = State::waiting;
  Status error;  // why, when failed
};

// Runs on an engine or KV thread on every change of a request's state; keep it short and do not
// call back into the Sender/Receiver from it.
using StateCallback = std::function<void(const std::string& id, const RequestStatus& status)>;

// Liveness: every peer gets a heartbeat each interval; a peer silent for
// 2 * heartbeat_interval + the engine's request_timeout is dead, and so are its requests.
struct Liveness {
  std::chrono::milliseconds heartbeat_interval{1000};
};

}  // namespace fabric::kv
