"""fabric_lib.moe across processes: DeepEP-shaped dispatch/combine on torch host tensors, checked
against a dense reference computed in each process from the same seeds."""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import socket
import traceback

import numpy as np
import pytest
from peers import VICTIM_IDLE, wait_until_quiet

torch = pytest.importorskip("torch")

CTX = mp.get_context("spawn")
E, H, R, T = 12, 40, 4, 16


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _inputs(group: int, it: int):
    rng = np.random.default_rng(1000 * it + group)
    tokens = int(rng.integers(0, T + 1))
    x = torch.from_numpy(rng.integers(-128, 128, (tokens, H)).astype(np.float32) / 128).to(torch.bfloat16)
    topk = np.full((tokens, R), -1, np.int64)
    for t in range(tokens):
        chosen = rng.permutation(E)[:R]
        keep = rng.random(R) > 0.1
        topk[t, keep] = chosen[keep]
    weights = (rng.integers(-128, 128, (tokens, R)).astype(np.float32) / 128) * (topk >= 0)
    return x, torch.from_numpy(topk), torch.from_numpy(weights.astype(np.float32))


def _expert(e: int, rows):
    return (rows.float() * (1 + e / 8)).to(torch.bfloat16)


def _reference_combine(x, topk, weights):
    acc = torch.zeros(x.shape[0], H, dtype=torch.float32)
    for k in range(R):
        for t in range(x.shape[0]):
            e = int(topk[t, k])
            if e >= 0:
                acc[t] = acc[t] + weights[t, k] * _expert(e, x[t : t + 1])[0].float()
    return acc


def _rank(rank: int, world: int, node: int, port: int, iterations: int, hooks: bool, victim: int, q) -> None:
    try:
        import torch.distributed as dist

        from fabric_lib.moe import Buffer

        store = dist.TCPStore("127.0.0.1", port, world, rank == 0, timeout=datetime.timedelta(seconds=60))
        idle = VICTIM_IDLE if rank == victim else {}
        buf = Buffer(rank, world, E, H, T, R, store=store, node_size=node, max_private_tokens=3,
                     timeout_ms=1500 if victim >= 0 else 20000, request_timeout_ms=1000, **idle)
        first = rank * E // world
        for it in range(iterations):
            x, topk, w = _inputs(rank, it)
            if rank == victim and it == 2:
                # Dies without a word, mid-run, once nothing of its own is in flight.
                buf._group.wait_idle()
                wait_until_quiet(buf._group.outstanding_requests)
                os._exit(0)
            if hooks:
                recv_x, recv_count, handle, hook = buf.dispatch(x, topk, w, return_recv_hook=True)
                hook()
            else:
                recv_x, recv_count, handle = buf.dispatch(x, topk, w)
            # The dense reference of what this rank's experts receive.
            for e, rows in enumerate(buf.expert_rows(recv_x, handle)):
                want = [xs[t] for s in range(world) for xs, ts, _ in [_inputs(s, it)]
                        for t in range(xs.shape[0]) if (ts[t] == first + e).any()]
                assert int(recv_count[e]) == len(want), (it, e)
                if want:
                    assert torch.equal(rows, torch.stack(want)), (it, e)
            y = torch.zeros_like(recv_x)
            for e, rows in enumerate(buf.expert_rows(recv_x, handle)):
                b = handle.expert_begin[e]
                y[b : b + rows.shape[0]] = _expert(first + e, rows)
            if hooks:
                out, hook = buf.combine(y, handle, return_recv_hook=True)
                hook()
            else:
                out = buf.combine(y, handle)
            want = _reference_combine(x, topk, w)
            assert torch.equal(out, want), f"iteration {it}: combine differs"
        buf.quiesce()
        stats = buf.stats()
        assert stats["stray_immediates"] == 0 and stats["submissions"] == stats["completions"]
        q.put((rank, "ok", stats))
    except Exception as e:  # noqa: BLE001 - the test reports it
        broken = buf.broken_ranks() if "buf" in locals() else []
        q.put((rank, type(e).__name__ + ": " + str(e), {"broken": broken, "tb": traceback.format_exc()}))


def _run(world: int, node: int, iterations: int, hooks: bool = False, victim: int = -1):
    port = _free_port()
    q = CTX.Queue()
    procs = [CTX.Process(target=_rank, args=(r, world, node, port, iterations, hooks, victim, q))
             for r in range(world)]
    for p in procs:
        p.start()
    results = {}
    try:
        for _ in range(world - (1 if victim >= 0 else 0)):
            rank, status, extra = q.get(timeout=180)
            results[rank] = (status, extra)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return results


@pytest.mark.parametrize("world,node", [(2, 1), (4, 2)])
def test_dispatch_and_combine_equal_the_dense_reference(world: int, node: int) -> None:
    results = _run(world, node, iterations=6)
    for rank, (status, extra) in sorted(results.items()):
        assert status == "ok", (rank, status, extra)


def test_send_and_receive_halves_run_separately_through_hooks() -> None:
    results = _run(3, 1, iterations=4, hooks=True)
    for rank, (status, extra) in sorted(results.items()):
        assert status == "ok", (rank, status, extra)


def test_a_dead_rank_is_named_in_the_error_of_every_survivor() -> None:
    results = _run(3, 1, iterations=5, victim=1)
    assert sorted(results) == [0, 2]
    for rank, (status, extra) in results.items():
        assert status.startswith("FabricTimeoutError"), (rank, status)
        assert "rank(s) 1" in status, (rank, status)
        assert extra["broken"] == [1], (rank, extra)
