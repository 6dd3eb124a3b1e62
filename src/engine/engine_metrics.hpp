#pragma once
// The counters behind TransferEngine::metrics(): one RequestMetrics per worker (its requests'
// outcomes, peers and latencies, added where a request is fully posted and where it is
// reported), one EngineCounters per engine (what is not a request). Relaxed atomic adds: a
// counter is read only as a sum, never to order memory.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "fabric/metrics.hpp"

namespace fabric::engine {

struct Op;

// One latency histogram's buckets (not cumulative) and sum.
class LatencyCounts {
 public:
  void add(std::uint64_t ns) noexcept;
  void add_to(LatencyHistogram& out) const noexcept;

 private:
  std::array<std::atomic<std::uint64_t>, kLatencyBuckets> buckets_{};
  std::atomic<std::uint64_t> sum_ns_{0};
};

class RequestMetrics {
 public:
  // `peer_slots`: PeerIndex::slots(), counters allocated here, once.
  explicit RequestMetrics(std::uint32_t peer_slots);

  // The provider took the request's last operation: its post latency; it leaves the queue.
  void posted(Op& op, std::uint64_t now_ns) noexcept;
  // A request reported to its caller: its kind, peer, payload, outcome and submit time (0:
  // unknown).
  void record(const Op& op, std::uint64_t now_ns) noexcept;
  // A request reported (expired) before the provider or the queue gave its operations back,
  // and such a request's end once they are back: EngineMetrics::held_after_report.
  void held(bool now_held) noexcept;
  // `outstanding`: the worker's requests accepted and not yet reported.
  void add_to(EngineMetrics& out, std::uint64_t outstanding) const noexcept;

 private:
  struct Kind {
    std::atomic<std::uint64_t> ok{0}, failed{0}, bytes_ok{0};
  };
  static void count(Kind& k, const Op& op, std::uint64_t bytes) noexcept;

  std::array<Kind, kRequestKinds> kinds_;
  LatencyCounts latency_;
  LatencyCounts post_latency_;
  // Requests fully posted and not yet reported: the rest of the outstanding ones are queued.
  std::atomic<std::uint64_t> posted_unreported_{0};
  std::atomic<std::uint64_t> held_{0};
  const std::uint32_t peer_slots_;
  std::unique_ptr<Kind[]> peers_;  // by PeerIndex slot
};

struct EngineCounters {
  std::atomic<std::uint64_t> peers_fenced{0};

  void add_to(EngineMetrics& out) const noexcept;
};

// The payload a request moves: what a kind's plan says, for the bytes counters.
std::uint64_t payload_bytes(const Op& op) noexcept;

}  // namespace fabric::engine
