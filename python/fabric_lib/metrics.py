"""Engine metrics for Prometheus (docs/observability.md).

``register(engine)`` adds an engine to a collector on prometheus_client's default registry, so
an existing ``/metrics`` endpoint (vLLM's API server, a Ray dashboard agent, your own) shows it;
``start_http_server(port)`` serves one for programs without. Each scrape reads
``Engine.metrics()``, a lock-free snapshot, so nothing is counted twice in Python.

Families (label ``engine`` is the engine's instance id, one value per engine of the process):

- ``fabric_requests_total{kind, outcome}``: requests reported, ``outcome`` ok or failed;
- ``fabric_bytes_total{kind}``: payload of the requests that completed ok;
- ``fabric_peer_requests_total{peer, outcome}``, ``fabric_peer_bytes_total{peer}``: the same
  per peer (single-peer kinds), ``peer`` the peer engine's instance id for the first
  ``metrics_peer_labels`` peers, ``other`` for the rest;
- ``fabric_request_latency_seconds``: submit to completion, all kinds (histogram);
- ``fabric_post_latency_seconds``: submit to the last operation posted (histogram);
- ``fabric_in_flight_requests``, ``fabric_queued_requests``, ``fabric_held_requests``,
  ``fabric_peers_known``,
  ``fabric_registrations``, ``fabric_registered_bytes`` (gauges);
- ``fabric_peers_lost_total``, ``fabric_imms_received_total``, ``fabric_messages_received_total``,
  ``fabric_messages_unrouted_total``, ``fabric_peers_fenced_total``.

``register_workload(workload, name)`` adds a weights Trainer or Receiver (``fabric_weights_*``)
or a moe Buffer (``fabric_moe_*``), label ``workload``; see _workload_metrics.FAMILIES.

prometheus_client's multi-process mode (PROMETHEUS_MULTIPROC_DIR set before it is imported): a
process that registers an engine or a workload also copies their series into its own
multi-process files, every FABRIC_METRICS_MULTIPROC_INTERVAL_S (1 s) and at exit, so the process
serving /metrics through MultiProcessCollector shows them (_multiprocess_metrics.py).
"""

from __future__ import annotations

import errno
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from . import _multiprocess_metrics
from ._native import Engine, InvalidArgumentError, ShutdownError
from ._workload_metrics import WorkloadCollector

__all__ = ["EngineCollector", "MetricsServer", "register", "register_workload", "start_http_server", "unregister",
           "unregister_workload", "write_multiprocess_files"]


# One series per engine each: (metrics() key, family name, help).
_ENGINE_GAUGES = (
    ("in_flight", "fabric_in_flight_requests", "Requests accepted and not yet reported"),
    ("queue_depth", "fabric_queued_requests", "Requests accepted with operations not yet posted"),
    (
        "held_after_report",
        "fabric_held_requests",
        "Requests reported (expired) whose operations the provider still holds",
    ),
    ("peers_known", "fabric_peers_known", "Peers resolved, not since fenced or found gone"),
    ("registrations", "fabric_registrations", "Live memory registrations"),
    ("registered_bytes", "fabric_registered_bytes", "Bytes of the live registrations"),
)
_ENGINE_COUNTERS = (
    ("peers_lost", "fabric_peers_lost", "Known peers found gone or fenced"),
    ("imms_received", "fabric_imms_received", "WRITE-with-immediate arrivals counted"),
    ("messages_received", "fabric_messages_received", "Messages handed to receive callbacks"),
    ("messages_unrouted", "fabric_messages_unrouted", "Channel messages for no channel open here, dropped"),
    ("peers_fenced", "fabric_peers_fenced", "Peers fenced (fence_peer)"),
)


class EngineCollector(Collector):
    """Reads every registered engine's metrics() at each scrape. Stopped or collected engines
    drop out by themselves (weak references), so registering never keeps an engine alive."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engines: weakref.WeakValueDictionary[str, Engine] = weakref.WeakValueDictionary()

    def add(self, engine: Engine, name: str) -> None:
        with self._lock:
            self._engines[name] = engine

    def remove(self, name: str) -> None:
        with self._lock:
            self._engines.pop(name, None)

    def _snapshots(self) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            engines = list(self._engines.items())
        out = []
        for name, engine in engines:
            try:
                out.append((name, engine.metrics()))
            except ShutdownError:
                continue  # stopped between the scrape and now: nothing to report
        return out

    def collect(self) -> Iterator[Any]:
        snapshots = self._snapshots()
        requests = CounterMetricFamily(
            "fabric_requests", "Requests reported to their caller", labels=["engine", "kind", "outcome"]
        )
        payload = CounterMetricFamily(
            "fabric_bytes", "Payload of the requests that completed ok", labels=["engine", "kind"]
        )
        peer_requests = CounterMetricFamily(
            "fabric_peer_requests",
            "Single-peer requests reported, by peer (the first metrics_peer_labels, then other)",
            labels=["engine", "peer", "outcome"],
        )
        peer_payload = CounterMetricFamily(
            "fabric_peer_bytes",
            "Payload of the single-peer requests that completed ok, by peer",
            labels=["engine", "peer"],
        )
        histograms = {
            "latency": HistogramMetricFamily(
                "fabric_request_latency_seconds", "Submit to completion reported, every kind", labels=["engine"]
            ),
            "post_latency": HistogramMetricFamily(
                "fabric_post_latency_seconds",
                "Submit to the request's last operation taken by the provider, every kind",
                labels=["engine"],
            ),
        }
        gauges = {key: GaugeMetricFamily(n, h, labels=["engine"]) for key, n, h in _ENGINE_GAUGES}
        counters = {key: CounterMetricFamily(n, h, labels=["engine"]) for key, n, h in _ENGINE_COUNTERS}
        for name, m in snapshots:
            for kind, c in m["requests"].items():
                requests.add_metric([name, kind, "ok"], c["ok"])
                requests.add_metric([name, kind, "failed"], c["failed"])
                payload.add_metric([name, kind], c["bytes_ok"])
            for p in m["peers"]:
                peer_requests.add_metric([name, p["peer"], "ok"], p["ok"])
                peer_requests.add_metric([name, p["peer"], "failed"], p["failed"])
                peer_payload.add_metric([name, p["peer"]], p["bytes_ok"])
            for key, family in histograms.items():
                h = m[key]
                buckets = [(_bound(b), n) for b, n in h["buckets"]]
                family.add_metric([name], buckets, sum_value=h["sum_seconds"])
            for key, family in gauges.items():
                family.add_metric([name], m[key])
            for key, family in counters.items():
                family.add_metric([name], m[key])
        yield requests
        yield payload
        yield peer_requests
        yield peer_payload
        yield from histograms.values()
        yield from gauges.values()
        yield from counters.values()


def _bound(seconds: float) -> str:
    return "+Inf" if seconds == float("inf") else repr(seconds)


_collector_lock = threading.Lock()
_collectors: dict[int, EngineCollector] = {}  # id(registry) -> its collector


def _collector_for(registry: CollectorRegistry) -> EngineCollector:
    with _collector_lock:
        collector = _collectors.get(id(registry))
        if collector is None:
            collector = _collectors[id(registry)] = EngineCollector()
            registry.register(collector)
        return collector


def register(engine: Engine, name: str | None = None, registry: CollectorRegistry = REGISTRY) -> str:
    """Exports `engine`'s metrics on `registry` under label engine=`name` (default: its
    instance id in hex). Returns the name. Registering the same name again replaces it."""
    label = name if name is not None else f"{engine.main_address.instance_id:016x}"
    _collector_for(registry).add(engine, label)
    _start_mirror()
    return label


def unregister(name: str, registry: CollectorRegistry = REGISTRY) -> None:
    """Stops exporting the engine registered under `name`."""
    _collector_for(registry).remove(name)


_workload_collectors: dict[int, WorkloadCollector] = {}  # id(registry) -> its collector


def register_workload(workload: Any, name: str, registry: CollectorRegistry = REGISTRY) -> str:
    """Exports a weights Trainer or Receiver (fabric_weights_*) or a moe Buffer (fabric_moe_*)
    on `registry` under label workload=`name`; its engine is registered with register().
    InvalidArgumentError for any other object. Returns the name."""
    with _collector_lock:
        collector = _workload_collectors.get(id(registry))
        if collector is None:
            collector = _workload_collectors[id(registry)] = WorkloadCollector()
            registry.register(collector)
    collector.add(workload, name)
    _start_mirror()
    return name


def unregister_workload(name: str, registry: CollectorRegistry = REGISTRY) -> None:
    """Stops exporting the workload registered under `name`."""
    with _collector_lock:
        collector = _workload_collectors.get(id(registry))
    if collector is not None:
        collector.remove(name)


def _every_collector() -> list[Collector]:
    with _collector_lock:
        return [*_collectors.values(), *_workload_collectors.values()]


_mirror = _multiprocess_metrics.Mirror(_every_collector)


def _start_mirror() -> None:
    if _multiprocess_metrics.enabled():
        _mirror.start()


def write_multiprocess_files() -> bool:
    """In prometheus_client's multi-process mode, copies every registered engine's and
    workload's series into this process's files now (a copy is made every
    FABRIC_METRICS_MULTIPROC_INTERVAL_S seconds and at exit anyway), and returns True; outside
    that mode it does nothing and returns False."""
    if not _multiprocess_metrics.enabled():
        return False
    _mirror.write()
    return True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
        return  # one line per scrape on stderr helps nobody


class MetricsServer:
    """A /metrics endpoint on a daemon thread (start_http_server); close() stops it."""

    def __init__(self, httpd: WSGIServer) -> None:
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name="fabric-metrics", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        """The port it listens on (the one the kernel chose when asked for 0)."""
        return int(self._httpd.server_address[1])

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(10)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *args: object) -> None:
        self.close()


def start_http_server(
    port: int, addr: str = "127.0.0.1", registry: CollectorRegistry = REGISTRY
) -> MetricsServer:
    """Serves `registry` (with every registered engine) at http://addr:port/metrics, for programs
    without a /metrics endpoint; loopback unless told otherwise, port 0 for any free one. Raises
    InvalidArgumentError naming the port when it is in use."""
    try:
        httpd = make_server(addr, port, make_wsgi_app(registry), handler_class=_QuietHandler)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise InvalidArgumentError(f"metrics port {addr}:{port} is in use") from e
        raise
    return MetricsServer(httpd)
