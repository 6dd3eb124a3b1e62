#pragma once
// Settings shared by the field suite's test processes and its peer program.

#include <chrono>
#include <cstdint>
#include <string>

#include "fabric/engine.hpp"

namespace fabric::field {

// The request_timeout of the suite's engines, the engine's default: how long a silent peer takes
// to turn into errors. A peer killed on tcp fails at once (the connection resets), so this only
// bounds a peer that is alive but starved: at 1.5 s, a peer just started beside vLLM at load
// average 20 saw 14 requests time out with nothing posted (docs/reliability.md, finding 8).
inline constexpr std::chrono::milliseconds kRequestTimeout{5000};
// Scheduling slack over a bound (callback hop, a loaded 2-core CI box).
inline constexpr std::chrono::milliseconds kMargin{3000};
// Bound on anything expected to happen (a peer starting, a completion arriving).
inline constexpr std::chrono::milliseconds kWait{20000};
inline constexpr std::uint32_t kImm = 0xf1e1d;
inline constexpr std::uint32_t kMaxMessage = 8192;

// IP providers on 127.0.0.1 only; "tcp" is tcp;ofi_rxm.
inline EngineConfig engine_config(const std::string& provider,
                                  std::chrono::milliseconds request_timeout = kRequestTimeout) {
  EngineConfig config;
  config.provider = provider;
  config.bind_address = "127.0.0.1";
  config.request_timeout = request_timeout;
  config.max_message_size = kMaxMessage;
  return config;
}

}  // namespace fabric::field
