#include "fabric_test/victim.hpp"

#include <chrono>

namespace fabric::test {

EngineConfig victim_config(EngineConfig config) {
  if (config.provider == "shm") {
    config.idle_spin = std::chrono::microseconds(0);
    config.idle_yield = std::chrono::microseconds(0);
    config.idle_sleep = std::chrono::milliseconds(20);
  }
  return config;
}

}  // namespace fabric::test
