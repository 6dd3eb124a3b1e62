#include "fabric/kv/state.hpp"

namespace fabric::kv {

std::string_view state_name(State s) noexcept {
  switch (s) {
    case State::waiting: return "waiting";
    case State::transferring: return "transferring";
    case State::done: return "done";
    case State::failed: return "failed";
    case State::cancelled: return "cancelled";
  }
  return "unknown";
}

}  // namespace fabric::kv
