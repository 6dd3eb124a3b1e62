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
        assert got[("fabric_post_latency_seconds_count", engine)] == len(SIZES)
        assert got[("fabric_post_latency_seconds_bucket", inf)] == len(SIZES)
        assert got[("fabric_queued_requests", engine)] == 0
        assert got[("fabric_held_requests", engine)] == 0
        assert got[("fabric_peers_known", engine)] == 1
        assert got[("fabric_peers_lost_total", engine)] == 0
        peer = f"{rx.main_address.instance_id:016x}"
        peer_ok = tuple(sorted((("engine", name), ("peer", peer), ("outcome", "ok"))))
        assert got[("fabric_peer_requests_total", peer_ok)] == len(SIZES)
        peer_bytes = tuple(sorted((("engine", name), ("peer", peer))))
        assert got[("fabric_peer_bytes_total", peer_bytes)] == sum(SIZES)
        other_bytes = tuple(sorted((("engine", name), ("peer", "other"))))
        assert got[("fabric_peer_bytes_total", other_bytes)] == 0


def test_peers_past_the_labelled_ones_scrape_as_other() -> None:
    labelled = 2
    sizes = [100, 200, 300, 400]  # one peer each, written in this order
    registry = CollectorRegistry()
    with fl.Engine("shm", metrics_peer_labels=labelled) as tx:
        src = np.ones(4096, np.uint8)
        src_h, _ = tx.reg_mr(src)
        peers = [fl.Engine("shm") for _ in sizes]
        try:
            dsts = [np.zeros(4096, np.uint8) for _ in sizes]
            for peer, dst, n in zip(peers, dsts, sizes):
                _, desc = peer.reg_mr(dst)
                tx.single_write(src_h, desc, n).wait(60)
            fm.register(tx, "tx", registry=registry)
            got = _families(registry)
            ids = [f"{p.main_address.instance_id:016x}" for p in peers]
        finally:
            for peer in peers:
                peer.stop()
    values = {dict(labels)["peer"]: v for (n, labels), v in got.items() if n == "fabric_peer_bytes_total"}
    assert values == {ids[0]: sizes[0], ids[1]: sizes[1], "other": sizes[2] + sizes[3]}
    assert len(values) == labelled + 1
    oks = [v for (n, labels), v in got.items() if n == "fabric_peer_requests_total" and ("outcome", "ok") in labels]
    assert sum(oks) == len(sizes)
    assert got[("fabric_peers_known", (("engine", "tx"),))] == len(sizes)


def test_too_many_peer_labels_is_refused() -> None:
    with pytest.raises(fl.InvalidArgumentError, match="metrics_peer_labels"):
        fl.Engine("shm", metrics_peer_labels=1025)


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


def _families(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client import generate_latest

    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_weights_workload_families_count_the_updates_sent() -> None:
    from fabric_lib.weights import (InferenceLayout, MeshGroup, NameRule, Receiver, SourceParam, TargetParam,
                                    Trainer, TrainerLayout, plan, plan_input_json)

    shape = [256, 64]
    layout = TrainerLayout([("fsdp", 1)], [MeshGroup("all")], [SourceParam("w", shape, "float32", ["R"], "all")])
    targets = InferenceLayout([("tp", 1)], [TargetParam("w", shape, "float32", ["R"])])
    sched = plan(plan_input_json(layout, targets, [NameRule("w", ["w"])]))
    registry = CollectorRegistry()
    with fl.Engine("shm") as inference, fl.Engine("shm") as engine:
        receiver = Receiver(inference, sched, 0)
        word = np.zeros(64, np.uint8)
        trainer = Trainer(engine, sched, layout, 0, [receiver.desc], [engine.reg_mr(word)[1]],
                          inference_imms=[receiver.imm_block], timeout_s=30.0)
        fm.register_workload(trainer, "trainer0", registry=registry)
        fm.register_workload(receiver, "inference0", registry=registry)
        w = np.arange(shape[0] * shape[1], dtype=np.float32).reshape(shape)
        for version in (1, 2):
            receiver.expect(version)
            trainer.update(version, {"w": w + version})
            assert receiver.wait(version, 30)
        got = _families(registry)
        t = (("workload", "trainer0"),)
        assert got[("fabric_weights_updates_total", tuple(sorted(t + (("outcome", "ok"),))))] == 2
        assert got[("fabric_weights_updates_total", tuple(sorted(t + (("outcome", "failed"),))))] == 0
        assert got[("fabric_weights_version", t)] == 2
        assert got[("fabric_weights_bytes_total", t)] == 2 * w.nbytes
        assert got[("fabric_weights_update_seconds_total", t)] > 0
        assert got[("fabric_weights_complete_version", (("workload", "inference0"),))] == 2
        fm.unregister_workload("trainer0", registry=registry)
        assert not any(k[1] == t for k in _families(registry))


def test_moe_workload_families_count_dispatch_and_combine() -> None:
    from fabric_lib.moe import Buffer

    registry = CollectorRegistry()
    with Buffer(0, 1, 4, 64, 8, 2, all_gather=lambda b: [b], x_dtype="f32", combine_dtype="f32") as buf:
        fm.register_workload(buf, "ep0", registry=registry)
        x = np.ones((5, 64), np.float32)
        idx = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]], np.int64)
        w = np.full((5, 2), 0.5, np.float32)
        recv_x, _, handle = buf.dispatch(x, idx, w)
        out = buf.combine(np.ascontiguousarray(recv_x), handle)
        assert np.allclose(out, x)
        got = _families(registry)
        for phase in ("dispatch", "combine"):
            labels = (("phase", phase), ("workload", "ep0"))
            assert got[("fabric_moe_calls_total", labels)] == 1
            assert got[("fabric_moe_tokens_total", labels)] == 5
            assert got[("fabric_moe_seconds_total", labels)] > 0


def test_register_workload_refuses_what_is_not_a_workload() -> None:
    with pytest.raises(fl.InvalidArgumentError, match="register_workload"):
        fm.register_workload(object(), "x", registry=CollectorRegistry())
