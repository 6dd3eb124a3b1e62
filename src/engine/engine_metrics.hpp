#pragma once
// The counters behind TransferEngine::metrics(): one RequestMetrics per worker (its requests'
// outcomes and latency, added where a request is reported), one EngineCounters per engine (what
// is not a request). Relaxed atomic adds: a counter is read only as a sum, never to order memory.

#include <array>
#include <atomic>
#include <cstdint>

#include "fabric/metrics.hpp"

namespace fabric::engine {

struct Op;

class RequestMetrics {
 public:
  // A request reported to its caller: its kind, payload, outcome and submit time (0: unknown).
  void record(const Op& op, std::uint64_t now_ns) noexcept;
  void add_to(EngineMetrics& out) const noexcept;

 private:
  struct Kind {
    std::atomic<std::uint64_t> ok{0}, failed{0}, bytes_ok{0};
  };
  std::array<Kind, kRequestKinds> kinds_;
  std::array<std::atomic<std::uint64_t>, kLatencyBuckets> buckets_{};  // not cumulative
  std::atomic<std::uint64_t> latency_ns_{0};
};

struct EngineCounters {
  std::atomic<std::uint64_t> peers_fenced{0};

  void add_to(EngineMetrics& out) const noexcept;
};

// The payload a request moves: what a kind's plan says, for the bytes counters.
std::uint64_t payload_bytes(const Op& op) noexcept;

}  // namespace fabric::engine
