// Engine.metrics(): TransferEngine::metrics() as plain Python values, which
// fabric_lib.metrics turns into Prometheus families.

#include <pybind11/pybind11.h>

#include <string>

#include "engine.hpp"
#include "fabric/metrics.hpp"

namespace py = pybind11;

namespace fabric::python {

namespace {

py::dict metrics(PyEngine& self) {
  const EngineMetrics m = self.call_released([](TransferEngine& e) { return e.metrics(); });
  py::dict requests;
  for (std::size_t k = 0; k < kRequestKinds; ++k) {
    py::dict one;
    one["ok"] = m.requests[k].ok;
    one["failed"] = m.requests[k].failed;
    one["bytes_ok"] = m.requests[k].bytes_ok;
    requests[py::str(std::string(request_kind_name(k)))] = std::move(one);
  }
  py::list buckets;
  for (std::size_t b = 0; b < kLatencyBuckets; ++b) {
    buckets.append(py::make_tuple(latency_bucket_bound_seconds(b), m.latency.cumulative[b]));
  }
  py::dict latency;
  latency["buckets"] = std::move(buckets);
  latency["count"] = m.latency.count;
  latency["sum_seconds"] = m.latency.sum_seconds;
  py::dict out;
  out["requests"] = std::move(requests);
  out["latency"] = std::move(latency);
  out["in_flight"] = m.in_flight;
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
             "bytes_ok), latency (buckets as (upper bound in s, cumulative count), count, "
             "sum_seconds; submit to completion), in_flight, registrations, registered_bytes, "
             "imms_received, messages_received, messages_unrouted, peers_fenced. fabric_lib.metrics exports it to "
             "Prometheus.");
}

}  // namespace fabric::python
