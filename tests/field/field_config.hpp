#pragma once
// Settings shared by the field suite's test processes and its peer program.

#include <chrono>
#include <cstdint>
#include <string>

#include "fabric/engine.hpp"

namespace fabric::field {

// The request_timeout of every engine in the suite: how long a silent peer takes to turn into
// errors. Short, so the cases that wait it out stay cheap; long enough for a loaded 2-core host.
inline constexpr std::chrono::milliseconds kRequestTimeout{1500};
// Scheduling slack over a bound (callback hop, a loaded 2-core CI box).
inline constexpr std::chrono::milliseconds kMargin{3000};
// Bound on anything expected to happen (a peer starting, a completion arriving).
inline constexpr std::chrono::milliseconds kWait{20000};
inline constexpr std::uint32_t kImm = 0xf1e1d;
inline constexpr std::uint32_t kMaxMessage = 8192;

// IP providers on 127.0.0.1 only; "tcp" is tcp;ofi_rxm.
inline EngineConfig engine_config(const std::string& provider) {
  EngineConfig config;
  config.provider = provider;
  config.bind_address = "127.0.0.1";
  config.request_timeout = kRequestTimeout;
  config.max_message_size = kMaxMessage;
  return config;
}

}  // namespace fabric::field
