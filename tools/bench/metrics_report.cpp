#include "metrics_report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>

namespace bench {

namespace {

// The upper bound of the bucket holding the q-quantile: the histogram keeps 2^k µs bounds, so
// this is what it can say ("at most"), not an interpolated figure.
std::string quantile_bound(const fabric::LatencyHistogram& h, double q) {
  if (h.count == 0) return "-";
  const auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(h.count)));
  for (std::size_t b = 0; b < fabric::kLatencyBuckets; ++b) {
    if (h.cumulative[b] < rank) continue;
    const double bound = fabric::latency_bucket_bound_seconds(b);
    return std::isinf(bound) ? std::string("> 4 s") : fmt::format("<= {:g} us", bound * 1e6);
  }
  return "-";
}

nlohmann::json histogram_json(const fabric::LatencyHistogram& h) {
  nlohmann::json buckets = nlohmann::json::array();
  for (std::size_t b = 0; b < fabric::kLatencyBuckets; ++b) {
    const double bound = fabric::latency_bucket_bound_seconds(b);
    buckets.push_back({{"le", std::isinf(bound) ? nlohmann::json("+Inf") : nlohmann::json(bound)},
                       {"count", h.cumulative[b]}});
  }
  return {{"count", h.count}, {"sum_seconds", h.sum_seconds}, {"buckets", buckets}};
}

nlohmann::json counts_json(const fabric::RequestCounts& c) {
  return {{"ok", c.ok}, {"failed", c.failed}, {"bytes_ok", c.bytes_ok}};
}

}  // namespace

void print_metrics(const fabric::EngineMetrics& m) {
  fmt::print("\ninitiator engine metrics() after the run (warm-up rounds included)\n");
  fmt::print("{:<13} {:>12} {:>9} {:>16}\n", "kind", "ok", "failed", "bytes ok");
  for (std::size_t k = 0; k < fabric::kRequestKinds; ++k) {
    const fabric::RequestCounts& c = m.requests[k];
    if (c.ok == 0 && c.failed == 0) continue;
    fmt::print("{:<13} {:>12} {:>9} {:>16}\n", fabric::request_kind_name(k), c.ok, c.failed,
               c.bytes_ok);
  }
  fmt::print("latency (submit -> completion): {} requests, p50 {}, p99 {}\n", m.latency.count,
             quantile_bound(m.latency, 0.5), quantile_bound(m.latency, 0.99));
  fmt::print("post latency (submit -> last operation posted): p50 {}, p99 {}\n",
             quantile_bound(m.post_latency, 0.5), quantile_bound(m.post_latency, 0.99));
  fmt::print("in flight {}, queued {}, held after report {}; peers known {}, lost {}, fenced {}; "
             "registrations {} ({} bytes); immediates received {}; messages received {}, "
             "unrouted {}\n",
             m.in_flight, m.queue_depth, m.held_after_report, m.peers_known, m.peers_lost,
             m.peers_fenced, m.registrations, m.registered_bytes, m.imms_received,
             m.messages_received, m.messages_unrouted);
}

nlohmann::json metrics_json(const fabric::EngineMetrics& m) {
  nlohmann::json requests = nlohmann::json::object();
  for (std::size_t k = 0; k < fabric::kRequestKinds; ++k) {
    requests[std::string(fabric::request_kind_name(k))] = counts_json(m.requests[k]);
  }
  nlohmann::json peers = nlohmann::json::array();
  for (const fabric::PeerCounts& p : m.peers) {
    nlohmann::json row = counts_json(p.requests);
    row["peer"] = p.other ? nlohmann::json("other") : nlohmann::json(p.peer);
    peers.push_back(std::move(row));
  }
  return {{"requests", requests},
          {"latency", histogram_json(m.latency)},
          {"post_latency", histogram_json(m.post_latency)},
          {"peers", peers},
          {"in_flight", m.in_flight},
          {"queue_depth", m.queue_depth},
          {"held_after_report", m.held_after_report},
          {"peers_known", m.peers_known},
          {"peers_lost", m.peers_lost},
          {"peers_fenced", m.peers_fenced},
          {"registrations", m.registrations},
          {"registered_bytes", m.registered_bytes},
          {"imms_received", m.imms_received},
          {"messages_received", m.messages_received},
          {"messages_unrouted", m.messages_unrouted}};
}

}  // namespace bench
