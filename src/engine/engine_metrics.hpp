#pragma once
// The counters behind TransferEngine::metrics(): one RequestMetrics per worker (its requests'
// outcomes, peers and latencies, added where a request is fully posted and where it is
// reported), one EngineCounters per engine (what is not a request). A counter is read only as
// a sum, never to order memory.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "fabric/metrics.hpp"

namespace fabric::engine {

struct Op;

// A counter with one writer at a time: every RequestMetrics add happens inside the worker's
// loop pass (its thread's, or a caller's in assist() or post_on_submit, all under
// Worker::loop_mutex_, which orders them), and metrics() reads from any thread. So an add is a
// relaxed load and store, not a locked read-modify-write: on x86 a fetch_add is a `lock xadd`
// whatever its memory order, and ten of them per request cost fabric-bench's 64 B writes about
// a fifth of their rate (docs/observability.md, "What counting costs").
class SerialCounter {
 public:
  void add(std::uint64_t n) noexcept { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  void sub(std::uint64_t n) noexcept { v_.store(v_.load(std::memory_order_relaxed) - n, std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t load() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};

// One latency histogram's buckets (not cumulative) and sum.
class LatencyCounts {
 public:
  void add(std::uint64_t ns) noexcept;
  void add_to(LatencyHistogram& out) const noexcept;

 private:
  std::array<SerialCounter, kLatencyBuckets> buckets_{};
  SerialCounter sum_ns_;
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
    SerialCounter ok, failed, bytes_ok;
  };
  static void count(Kind& k, const Op& op, std::uint64_t bytes) noexcept;

  std::array<Kind, kRequestKinds> kinds_;
  LatencyCounts latency_;
  LatencyCounts post_latency_;
  // Requests fully posted and not yet reported: the rest of the outstanding ones are queued.
  SerialCounter posted_unreported_;
  SerialCounter held_;
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
