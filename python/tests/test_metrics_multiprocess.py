"""fabric_lib.metrics in prometheus_client's multi-process mode: processes that hold engines and
never serve /metrics copy their series into PROMETHEUS_MULTIPROC_DIR, and the process that
serves it (here the test, through MultiProcessCollector as a gunicorn or vLLM API server would)
shows each one's traffic exactly, summed where the labels meet (docs/observability.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.parser import text_string_to_metric_families

import fabric_lib.metrics as fm
import metrics_multiproc_peers as mp_peers
from peers import Peer

SIZES = [1, 4096, 65536]
WRITERS = 2

Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _scrape(directory: Path) -> Scrape:
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(directory))
    out: Scrape = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Polls `condition`, bounded: the copies happen on the writers' own clocks, with no event
    this process could wait on."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s")
        time.sleep(0.02)


def _ok(name: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return ("fabric_requests_total", (("engine", name), ("kind", "single_write"), ("outcome", "ok")))


def _in_flight(name: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return ("fabric_in_flight_requests", (("engine", name),))


def test_engines_in_other_processes_show_their_traffic_on_the_serving_side(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The children inherit it at spawn, before they import prometheus_client; this process
    # imported it already and stays in single-process mode.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    monkeypatch.setenv("FABRIC_METRICS_MULTIPROC_INTERVAL_S", "0.05")
    names = [f"writer{i}" for i in range(WRITERS)]
    peers = [Peer(mp_peers.writer_role, provider="shm", name=n, sizes=SIZES) for n in names]
    try:
        pids = []
        for p in peers:
            tag, pid = p.recv()
            assert tag == "sent"
            pids.append(pid)
        # The periodic copy: each writer's first round arrives without anything asked of it.
        def copied() -> bool:
            got = _scrape(tmp_path)
            return all(got.get(_ok(n)) == len(SIZES) for n in names)
        _wait_for(copied, timeout=30, what="each writer's first round in the multi-process files")
        got = _scrape(tmp_path)
        for n in names:
            assert got[("fabric_bytes_total", (("engine", n), ("kind", "single_write")))] == sum(SIZES)
            assert got[("fabric_request_latency_seconds_count", (("engine", n),))] == len(SIZES)
            assert got[("fabric_request_latency_seconds_bucket", (("engine", n), ("le", "+Inf")))] == len(SIZES)
            assert got[_in_flight(n)] == 0
            assert got[("fabric_registrations", (("engine", n),))] == 1

        for p in peers:
            p.send("again")
        for p in peers:
            assert p.recv() == "stopped"
            p.close()
        got = _scrape(tmp_path)
        for n in names:
            assert got[_ok(n)] == 2 * len(SIZES), got.get(_ok(n))
            assert got[("fabric_request_latency_seconds_count", (("engine", n),))] == 2 * len(SIZES)
        # A dead process's gauges leave once the serving side marks it dead; its counters stay.
        for pid in pids:
            mark_process_dead(pid, str(tmp_path))
        got = _scrape(tmp_path)
        for n in names:
            assert _in_flight(n) not in got
            assert got[_ok(n)] == 2 * len(SIZES)
    finally:
        for p in peers:
            if p.proc.is_alive():
                p.proc.kill()


def test_outside_multiprocess_mode_nothing_is_written() -> None:
    assert not fm.write_multiprocess_files()
