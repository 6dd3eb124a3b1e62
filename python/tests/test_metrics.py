"""fabric_lib.metrics: a /metrics endpoint scraped after known traffic shows exactly that traffic
(docs/observability.md)."""

from __future__ import annotations

import socket
import urllib.request

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

import fabric_lib as fl
import fabric_lib.metrics as fm

SIZES = [1, 4096, 65536, 1 << 20]


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_scraped_counts_equal_the_traffic_sent() -> None:
    registry = CollectorRegistry()
    with fl.Engine("tcp") as tx, fl.Engine("tcp") as rx:
        src = np.ones(1 << 20, np.uint8)
        dst = np.zeros_like(src)
        src_h, _ = tx.reg_mr(src)
        _, dst_d = rx.reg_mr(dst)
        for n in SIZES:
            tx.single_write(src_h, dst_d, n, imm=5).wait(60)
        rx.imm_counter(5).wait(len(SIZES), timeout=60)
        name = fm.register(tx, "tx", registry=registry)
        fm.register(rx, "rx", registry=registry)
        with fm.start_http_server(0, registry=registry) as server:
            got = _scrape(server.port)
        engine = (("engine", name),)
        ok = (("engine", name), ("kind", "single_write"), ("outcome", "ok"))
        assert got[("fabric_requests_total", tuple(sorted(ok)))] == len(SIZES)
        failed = (("engine", name), ("kind", "single_write"), ("outcome", "failed"))
        assert got[("fabric_requests_total", tuple(sorted(failed)))] == 0
        bytes_key = tuple(sorted((("engine", name), ("kind", "single_write"))))
        assert got[("fabric_bytes_total", bytes_key)] == sum(SIZES)
        assert got[("fabric_request_latency_seconds_count", engine)] == len(SIZES)
        inf = tuple(sorted((("engine", name), ("le", "+Inf"))))
        assert got[("fabric_request_latency_seconds_bucket", inf)] == len(SIZES)
        assert got[("fabric_registrations", engine)] == 1
        assert got[("fabric_registered_bytes", engine)] == src.nbytes
        assert got[("fabric_in_flight_requests", engine)] == 0
        assert got[("fabric_imms_received_total", (("engine", "rx"),))] == len(SIZES)


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(fl.InvalidArgumentError, match=f"127.0.0.1:{port} is in use"):
            fm.start_http_server(port, registry=CollectorRegistry())


def test_a_stopped_engine_drops_out_of_the_scrape() -> None:
    registry = CollectorRegistry()
    engine = fl.Engine("tcp")
    fm.register(engine, "gone", registry=registry)
    engine.stop()
    with fm.start_http_server(0, registry=registry) as server:
        got = _scrape(server.port)
    assert not any(dict(labels).get("engine") == "gone" for _, labels in got)
