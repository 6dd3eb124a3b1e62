#pragma once
// What an engine has done, for operators (TransferEngine::metrics(), docs/observability.md):
// requests and bytes by kind, outcome and peer, request and post latency, what is queued and in
// flight, peers known and lost, registrations, immediates and messages received. Counted on the
// data path with relaxed atomic adds, no lock; metrics() sums them on the caller's thread.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace fabric {

// Request kinds, in PostKind's order (fabric/post_timing.hpp).
inline constexpr std::size_t kRequestKinds = 8;
// "send", "single_write", "paged_write", "imm", "scatter", "barrier", "single_read",
// "paged_read": the `kind` label.
[[nodiscard]] std::string_view request_kind_name(std::size_t kind) noexcept;

struct RequestCounts {
  std::uint64_t ok = 0;
  std::uint64_t failed = 0;
  std::uint64_t bytes_ok = 0;  // payload of the requests that completed ok
};

// A latency histogram (submit -> completion reported, or submit -> last operation posted), all
// kinds: cumulative counts at upper bounds of 2^k µs, k = 0..kLatencyBuckets-2 (1 µs .. about
// 4.2 s), then everything (Prometheus' +Inf).
inline constexpr std::size_t kLatencyBuckets = 24;
[[nodiscard]] double latency_bucket_bound_seconds(std::size_t bucket) noexcept;

struct LatencyHistogram {
  std::array<std::uint64_t, kLatencyBuckets> cumulative{};  // requests at or below each bound
  std::uint64_t count = 0;
  double sum_seconds = 0;
};

// EngineConfig::metrics_peer_labels at most: each label is a few series in every scrape.
inline constexpr std::uint32_t kMaxPeerLabels = 1024;

// One peer's single-peer requests (every kind but scatter and barrier, which reach several).
struct PeerCounts {
  bool other = false;     // the peers past EngineConfig::metrics_peer_labels, together
  std::uint64_t peer = 0; // else the peer engine's NetAddr::instance_id
  RequestCounts requests;
};

struct EngineMetrics {
  std::array<RequestCounts, kRequestKinds> requests{};  // by kind
  LatencyHistogram latency;       // submit -> completion reported
  LatencyHistogram post_latency;  // submit -> its last operation taken by the provider
  // The first EngineConfig::metrics_peer_labels peers resolved, in that order, then `other`;
  // empty when metrics_peer_labels is 0.
  std::vector<PeerCounts> peers;
  std::uint64_t in_flight = 0;           // accepted, not yet reported
  std::uint64_t queue_depth = 0;         // accepted, not every operation posted yet
  // Requests already reported (expired: request_timeout) whose operations the engine still
  // holds, posted to the provider or queued, until the provider gives them back. One that
  // stays up means the provider keeps them (shm after a peer died with a WRITE outstanding,
  // docs/reliability.md): kill a shm peer only once this is 0.
  std::uint64_t held_after_report = 0;
  std::uint64_t peers_known = 0;         // peers resolved, not since fenced or found gone
  std::uint64_t peers_lost = 0;          // known peers found gone or fenced
  std::uint64_t registrations = 0;       // live registrations (reg_mr minus dereg_mr)
  std::uint64_t registered_bytes = 0;    // their bytes
  std::uint64_t imms_received = 0;       // WRITE-with-imm arrivals counted
  std::uint64_t messages_received = 0;   // SENDs delivered to receive callbacks
  std::uint64_t messages_unrouted = 0;   // channel pool messages for no open channel, dropped
  std::uint64_t peers_fenced = 0;        // fence_peer calls that succeeded
};

}  // namespace fabric
