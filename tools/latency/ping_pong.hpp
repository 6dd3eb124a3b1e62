#pragma once
// Immediate ping-pong between two processes: the round trip a peer sees for
// each worker idle policy.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "fabric/engine.hpp"

namespace fabric::latency {

struct Policy {
  std::string name;
  bool busy_poll = false;
  // The engine's defaults.
  std::chrono::microseconds idle_spin = EngineConfig{}.idle_spin;
  std::chrono::microseconds idle_yield = EngineConfig{}.idle_yield;
  std::chrono::microseconds idle_sleep = EngineConfig{}.idle_sleep;
};

struct RunSpec {
  std::string provider = "shm";
  Policy policy;
  std::uint32_t iterations = 2000;
  // Pause between pings so both workers go idle: the cost of waking them.
  std::chrono::microseconds gap{0};
};

struct Percentiles {
  double p50_us = 0, p90_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
};

// Forks the responder, runs the pings, returns round-trip percentiles.
// Throws std::runtime_error on any failure (bounded waits throughout).
Percentiles run_ping_pong(const RunSpec& spec);

EngineConfig engine_config(const RunSpec& spec);

}  // namespace fabric::latency
