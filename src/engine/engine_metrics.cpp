#include "engine/engine_metrics.hpp"

#include <bit>
#include <limits>

#include "engine/op.hpp"

namespace fabric {

std::string_view request_kind_name(std::size_t kind) noexcept {
  static constexpr std::string_view kNames[kRequestKinds] = {
      "send", "single_write", "paged_write", "imm", "scatter", "barrier", "single_read",
      "paged_read"};
  return kind < kRequestKinds ? kNames[kind] : "?";
}

double latency_bucket_bound_seconds(std::size_t bucket) noexcept {
  if (bucket + 1 >= kLatencyBuckets) return std::numeric_limits<double>::infinity();
  return static_cast<double>(std::uint64_t{1} << bucket) * 1e-6;
}

namespace engine {

namespace {

// OpKind -> the PostKind index that names it.
std::size_t kind_index(OpKind kind) noexcept {
  switch (kind) {
    case OpKind::send: return 0;
    case OpKind::single: return 1;
    case OpKind::paged: return 2;
    case OpKind::imm: return 3;
    case OpKind::scatter: return 4;
    case OpKind::barrier: return 5;
    case OpKind::single_read: return 6;
    case OpKind::paged_read: return 7;
  }
  return 0;
}

// The first bucket whose bound (2^k µs) holds `ns`.
std::size_t bucket_of(std::uint64_t ns) noexcept {
  const std::uint64_t us = (ns + 999) / 1000;
  const std::size_t k = us <= 1 ? 0 : static_cast<std::size_t>(std::bit_width(us - 1));
  return k < kLatencyBuckets - 1 ? k : kLatencyBuckets - 1;
}

constexpr auto kRelaxed = std::memory_order_relaxed;

}  // namespace

std::uint64_t payload_bytes(const Op& op) noexcept {
  switch (op.kind) {
    case OpKind::single:
    case OpKind::single_read: {
      std::uint64_t n = 0;
      for (const WritePiece& p : op.single.pieces) n += p.length;
      return n;
    }
    case OpKind::paged:
    case OpKind::paged_read:
      return op.paged.page_length * op.paged.src.indices.size();
    case OpKind::scatter: {
      std::uint64_t n = 0;
      for (const ScatterPiece& p : op.scatter.pieces) n += p.length;
      return n;
    }
    case OpKind::send:
      return op.send.message.size();
    case OpKind::imm:
    case OpKind::barrier:
      return 0;
  }
  return 0;
}

void LatencyCounts::add(std::uint64_t ns) noexcept {
  buckets_[bucket_of(ns)].add(1);
  sum_ns_.add(ns);
}

void LatencyCounts::add_to(LatencyHistogram& out) const noexcept {
  std::uint64_t running = 0;
  for (std::size_t b = 0; b < kLatencyBuckets; ++b) {
    running += buckets_[b].load();
    out.cumulative[b] += running;
  }
  // The count is the last cumulative bucket, so a snapshot's +Inf always equals it.
  out.count += running;
  out.sum_seconds += static_cast<double>(sum_ns_.load()) * 1e-9;
}

RequestMetrics::RequestMetrics(std::uint32_t peer_slots)
    : peer_slots_(peer_slots),
      peers_(peer_slots == 0 ? nullptr : std::make_unique<Kind[]>(peer_slots)) {}

void RequestMetrics::posted(Op& op, std::uint64_t now_ns) noexcept {
  op.left_queue = true;
  posted_unreported_.add(1);
  // `now_ns` is the pass's latest clock read (PostSlice::last_read_ns): a request submitted
  // after it and posted in the same pass counts as posted at once, so every posted request
  // is in the histogram.
  if (op.submitted_ns != 0) {
    post_latency_.add(now_ns > op.submitted_ns ? now_ns - op.submitted_ns : 0);
  }
}

void RequestMetrics::count(Kind& k, const Op& op, std::uint64_t bytes) noexcept {
  if (op.failed()) {
    k.failed.add(1);
  } else {
    k.ok.add(1);
    k.bytes_ok.add(bytes);
  }
}

void RequestMetrics::record(const Op& op, std::uint64_t now_ns) noexcept {
  const std::uint64_t bytes = op.failed() ? 0 : payload_bytes(op);
  count(kinds_[kind_index(op.kind)], op, bytes);
  if (op.peer_slot < peer_slots_) count(peers_[op.peer_slot], op, bytes);
  if (op.left_queue) posted_unreported_.sub(1);
  if (op.submitted_ns != 0 && now_ns >= op.submitted_ns) latency_.add(now_ns - op.submitted_ns);
}

void RequestMetrics::held(bool now_held) noexcept {
  if (now_held) {
    held_.add(1);
  } else {
    held_.sub(1);
  }
}

void RequestMetrics::add_to(EngineMetrics& out, std::uint64_t outstanding) const noexcept {
  for (std::size_t i = 0; i < kRequestKinds; ++i) {
    out.requests[i].ok += kinds_[i].ok.load();
    out.requests[i].failed += kinds_[i].failed.load();
    out.requests[i].bytes_ok += kinds_[i].bytes_ok.load();
  }
  for (std::size_t p = 0; p < peer_slots_ && p < out.peers.size(); ++p) {
    out.peers[p].requests.ok += peers_[p].ok.load();
    out.peers[p].requests.failed += peers_[p].failed.load();
    out.peers[p].requests.bytes_ok += peers_[p].bytes_ok.load();
  }
  latency_.add_to(out.latency);
  post_latency_.add_to(out.post_latency);
  // Read apart from `outstanding`: under traffic the difference may be off by the requests
  // posted or reported in between (never below 0); at rest it is exact.
  const std::uint64_t posted = posted_unreported_.load();
  out.queue_depth += outstanding > posted ? outstanding - posted : 0;
  out.held_after_report += held_.load();
}

void EngineCounters::add_to(EngineMetrics& out) const noexcept {
  out.peers_fenced += peers_fenced.load(kRelaxed);
}

}  // namespace engine
}  // namespace fabric
