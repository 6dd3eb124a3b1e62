"""Every operation between processes, on shm and tcp, with numpy arrays, checked byte for byte."""

from __future__ import annotations

import queue
import threading

import numpy as np
import pytest

import fabric_lib as fl
import peers
from peers import IMM, SEED, STEP_S, Peer, pattern


@pytest.mark.parametrize("op", ["single", "single_offsets", "single_sharded", "paged", "imm"])
def test_write_into_this_process(provider: str, op: str) -> None:
    peers.run_write_case(provider, "numpy", op)


def test_expect_imm_count_fires_once_the_data_has_landed(provider: str) -> None:
    n = 1 << 18
    with fl.Engine(provider) as engine:
        dst = np.zeros(n, np.uint8)
        _, desc = engine.reg_mr(dst)
        landed = threading.Event()
        seen: list[tuple[int, int, bool]] = []

        def reached(imm: int, count: int) -> None:
            seen.append((imm, count, bool((dst == pattern(n, SEED)).all())))
            landed.set()

        engine.expect_imm_count(IMM, 1, reached)
        args = dict(provider=provider, kind="numpy", op="single", n=n, seed=SEED, imm=IMM)
        with Peer(peers.writer, **args) as peer:
            peer.send(bytes(desc))
            assert peer.recv() == "written"
            assert landed.wait(STEP_S)
            assert seen == [(IMM, 1, True)]
            peer.send("bye")


def test_send_and_recv(provider: str) -> None:
    sizes = [1, 7, 4096, 65536]
    messages = [pattern(s, SEED + i).tobytes() for i, s in enumerate(sizes)]
    with fl.Engine(provider) as engine:
        got: queue.Queue[bytes] = queue.Queue()
        engine.submit_recvs(engine.max_message_size, 4, lambda m: got.put(bytes(m)))
        with Peer(peers.sender, provider=provider, messages=messages) as peer:
            peer.send(bytes(engine.main_address))
            assert peer.recv() == "sent"
            received = [got.get(timeout=STEP_S) for _ in messages]
            # SENDs are not ordered; each must arrive intact exactly once.
            assert sorted(received) == sorted(messages)
            assert got.empty()
            peer.send("bye")


def _start_receivers(provider: str, n: int, imms: int, count: int = 2) -> list[Peer]:
    return [
        Peer(peers.receiver, provider=provider, kind="numpy", n=n, imm=IMM, expected_imms=imms)
        for _ in range(count)
    ]


def _close_all(receivers: list[Peer]) -> None:
    for p in receivers:
        p.send("bye")
    for p in receivers:
        p.close()


@pytest.mark.parametrize("routing", ["peers", "bytes", 0])
@pytest.mark.parametrize("use_group", [True, False])
def test_scatter_to_two_peers(provider: str, routing: str | int, use_group: bool) -> None:
    n = 1 << 16
    receivers = _start_receivers(provider, n, fl.scatter_imm_count(n, 1, routing))
    try:
        with fl.Engine(provider) as engine:
            published = [p.recv() for p in receivers]
            addrs = [fl.NetAddr.from_bytes(a) for a, _ in published]
            descs = [fl.MrDesc.from_bytes(d) for _, d in published]
            group = engine.add_peer_group(addrs) if use_group else None
            src = pattern(2 * n, SEED)
            handle, _ = engine.reg_mr(src)
            slices = [fl.ScatterSlice(descs[0], n), (descs[1], n, n, 0)]
            engine.scatter(handle, slices, group=group, imm=IMM, routing=routing).wait(STEP_S)
            assert receivers[0].recv() == src[:n].tobytes()
            assert receivers[1].recv() == src[n:].tobytes()
    finally:
        _close_all(receivers)


@pytest.mark.parametrize("use_group", [True, False])
def test_barrier_reaches_every_peer(provider: str, use_group: bool) -> None:
    n = 4096
    receivers = _start_receivers(provider, n, 1, count=3)
    try:
        with fl.Engine(provider) as engine:
            published = [p.recv() for p in receivers]
            descs = [fl.MrDesc.from_bytes(d) for _, d in published]
            group = None
            if use_group:
                group = engine.add_peer_group([fl.NetAddr.from_bytes(a) for a, _ in published])
            engine.barrier(IMM, descs, group=group).wait(STEP_S)
            for p in receivers:  # each saw its one immediate, and no data
                assert p.recv() == bytes(n)
    finally:
        _close_all(receivers)


def test_writes_to_a_dead_peer_fail_without_hurting_others() -> None:
    # tcp only: libfabric 1.17's shm may complete a small write to a dead peer successfully
    # (docs/api.md, "Dead or unreachable peers").
    provider = "tcp"
    with fl.Engine(provider, request_timeout_ms=500) as engine:
        src = pattern(4096, SEED)
        handle, _ = engine.reg_mr(src)
        dead, alive = _start_receivers(provider, 4096, 1)
        try:
            (_, dead_desc), (_, alive_desc) = dead.recv(), alive.recv()
            # Talk to it once, then let it exit.
            engine.imm(IMM, fl.MrDesc.from_bytes(dead_desc)).wait(STEP_S)
            assert dead.recv() == bytes(4096)
            dead.send("bye")
            dead.close()
            failed = engine.single_write(handle, fl.MrDesc.from_bytes(dead_desc), 4096, imm=IMM)
            with pytest.raises((fl.FabricTimeoutError, fl.ProviderError)):
                failed.wait(STEP_S)
            engine.single_write(handle, fl.MrDesc.from_bytes(alive_desc), 4096, imm=IMM).wait(
                STEP_S
            )
            assert alive.recv() == src.tobytes()
        finally:
            _close_all([alive])


def test_post_on_submit_writes_land_and_are_counted(provider: str) -> None:
    n = 1 << 16
    with fl.Engine(provider, post_on_submit=True) as engine:
        src = pattern(n, SEED)
        dst = np.zeros(n, np.uint8)
        src_handle, _ = engine.reg_mr(src)
        _, dst_desc = engine.reg_mr(dst)
        counter = engine.imm_counter(IMM)
        for i in range(8):  # each its own 8 KiB, posted by this thread when the worker is idle
            part = n // 8
            engine.single_write(
                src_handle, dst_desc, part, imm=IMM, src_offset=i * part, dst_offset=i * part
            ).wait(STEP_S)
        counter.wait(8, STEP_S)
        assert (dst == src).all()


def test_host_memory_goes_to_host_group_and_writes_cross_groups(provider: str) -> None:
    n = 1 << 16
    with fl.Engine(provider, groups=2, host_group=1) as engine:
        assert engine.num_groups == 2
        assert engine.main_address.num_groups == 2
        src = pattern(n, SEED)
        dst = np.zeros(n, np.uint8)
        src_handle, src_desc = engine.reg_mr(src)
        _, dst_desc = engine.reg_mr(dst, group=0)
        assert src_desc.group == 1 and dst_desc.group == 0
        # From group 1's Domains into group 0's, in one engine: the bytes land and the
        # immediate is counted by the engine's one table.
        counter = engine.imm_counter(IMM)
        engine.single_write(src_handle, dst_desc, n, imm=IMM).wait(STEP_S)
        counter.wait(1, STEP_S)
        assert (dst == src).all()
    with pytest.raises(fl.InvalidArgumentError, match="host_group 2 does not exist"):
        fl.Engine(provider, groups=2, host_group=2)
