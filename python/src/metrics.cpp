// Engine.metrics(): TransferEngine::metrics() as plain Python values, which
// fabric_lib.metrics turns into Prometheus families.

#include <pybind11/pybind11.h>

#include <cinttypes>
#include <cstdio>
#include <string>

#include "engine.hpp"
#include "fabric/metrics.hpp"

namespace py = pybind11;

namespace fabric::python {

namespace {

py::dict counts(const RequestCounts& c) {
  py::dict one;
  one["ok"] = c.ok;
  one["failed"] = c.failed;
  one["bytes_ok"] = c.bytes_ok;
  return one;
}

py::dict histogram(const LatencyHistogram& h) {
  py::list buckets;
  for (std::size_t b = 0; b < kLatencyBuckets; ++b) {
    buckets.append(py::make_tuple(latency_bucket_bound_seconds(b), h.cumulative[b]));
  }
  py::dict out;
  out["buckets"] = std::move(buckets);
  out["count"] = h.count;
  out["sum_seconds"] = h.sum_seconds;
  return out;
}

// The peer's instance id as fabric_lib.metrics.register() names an engine by default, so the
// two labels join.
std::string peer_label(const PeerCounts& p) {
  if (p.other) return "other";
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, p.peer);
  return hex;
}

py::dict metrics(PyEngine& self) {
  const EngineMetrics m = self.call_released([](TransferEngine& e) { return e.metrics(); });
  py::dict requests;
  for (std::size_t k = 0; k < kRequestKinds; ++k) {
    requests[py::str(std::string(request_kind_name(k)))] = counts(m.requests[k]);
  }
  py::list peers;
  for (const PeerCounts& p : m.peers) {
    py::dict one = counts(p.requests);
    one["peer"] = peer_label(p);
    peers.append(std::move(one));
  }
  py::dict out;
  out["requests"] = std::move(requests);
  out["peers"] = std::move(peers);
  out["latency"] = histogram(m.latency);
  out["post_latency"] = histogram(m.post_latency);
  out["in_flight"] = m.in_flight;
  out["queue_depth"] = m.queue_depth;
  out["held_after_report"] = m.held_after_report;
  out["peers_known"] = m.peers_known;
  out["peers_lost"] = m.peers_lost;
  out["registrations"] = m.registrations;
  out["registered_bytes"] = m.registered_bytes;
  out["imms_received"] = m.imms_received;
  out["messages_received"] = m.messages_received;
  out["messages_unrouted"] = m.messages_unrouted;
  out["peers_fenced"] = m.peers_fenced;
  return out;
}

}  // namespace

void bind_metrics(py::module_& m) {
  auto engine = py::reinterpret_borrow<py::class_<PyEngine>>(m.attr("Engine"));
  engine.def("metrics", &metrics,
             "A snapshot of what the engine has done, as a dict: requests (per kind: ok, failed, "
             "bytes_ok), peers (a list of the same per labelled peer, 'peer' its instance id in "
             "hex or 'other'; scatters and barriers not included), latency (buckets as (upper "
             "bound in s, cumulative count), count, sum_seconds; submit to completion), "
             "post_latency (the same, submit to last operation posted), in_flight, queue_depth, "
             "held_after_report, "
             "peers_known, peers_lost, registrations, registered_bytes, imms_received, "
             "messages_received, messages_unrouted, peers_fenced. fabric_lib.metrics exports it "
             "to Prometheus.");
}

}  // namespace fabric::python
