"""Bad input on one rank of a fabric_lib.moe group: that rank gets a clear InvalidArgumentError
at once, and the other rank fails the iteration within its timeout, naming the rank that never
sent, instead of hanging. Two processes run every case in turn, each on new Buffers."""

from __future__ import annotations

import datetime
import multiprocessing as mp
import socket
import traceback

import pytest

torch = pytest.importorskip("torch")

CTX = mp.get_context("spawn")
E, H, T, R = 4, 16, 8, 2
CASES = ["hidden differs", "expert out of range", "too many tokens", "wrong dtype", "wrong hidden"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _case(rank: int, store, case: str) -> str:
    """Runs one case on rank `rank`; returns what it raised ('ok' when nothing)."""
    from fabric_lib.moe import Buffer

    bad = rank == 1
    hidden = H + 8 if bad and case == "hidden differs" else H
    try:
        buf = Buffer(rank, 2, E, hidden, T, R, store=store, key=f"bad/{case}", x_dtype="f32",
                     combine_dtype="f32", out_dtype="f32", timeout_ms=1500, request_timeout_ms=1000)
    except Exception as e:  # noqa: BLE001 - the result
        return f"{type(e).__name__}: {e}"
    try:
        tokens = T + 1 if bad and case == "too many tokens" else 4
        x = torch.ones(tokens, H + 1 if bad and case == "wrong hidden" else H)
        if bad and case == "wrong dtype":
            x = x.to(torch.bfloat16)
        ids = torch.tensor([[0, 2]] * tokens)
        if bad and case == "expert out of range":
            ids[3, 1] = E + 3
        w = torch.ones(tokens, R)
        recv_x, _, handle = buf.dispatch(x, ids, w)
        buf.combine(recv_x, handle)
        return "ok"
    except Exception as e:  # noqa: BLE001 - the result
        return f"{type(e).__name__}: {e} | broken {buf.broken_ranks()}"
    finally:
        buf.close()


def _rank(rank: int, port: int, q) -> None:
    try:
        import torch.distributed as dist

        store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=datetime.timedelta(seconds=60))
        q.put((rank, {case: _case(rank, store, case) for case in CASES}))
    except BaseException:  # noqa: BLE001 - reported
        q.put((rank, {"harness": traceback.format_exc()}))


@pytest.fixture(scope="module")
def outcomes():
    port = _free_port()
    q = CTX.Queue()
    procs = [CTX.Process(target=_rank, args=(r, port, q)) for r in range(2)]
    for p in procs:
        p.start()
    results = {}
    try:
        for _ in procs:
            rank, res = q.get(timeout=180)
            results[rank] = res
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return results


def test_a_hidden_size_that_differs_between_ranks_is_named_on_both(outcomes) -> None:
    for rank in (0, 1):
        got = outcomes[rank]["hidden differs"]
        assert got.startswith("InvalidArgumentError: moe Buffer: hidden differs between ranks"), (rank, got)
    assert "rank 0: 16; rank 1: 24" in outcomes[0]["hidden differs"]


@pytest.mark.parametrize("case,message", [
    ("expert out of range", "topk_idx[3][1] = 7 is not an expert"),
    ("too many tokens", "x has 9 tokens, more than num_max_dispatch_tokens_per_rank 8"),
    ("wrong dtype", "x is torch.bfloat16, this Buffer takes torch.float32"),
    ("wrong hidden", "x is [4, 17], [n, 16] needed"),
])
def test_bad_input_fails_its_rank_at_once_and_the_other_within_its_timeout(outcomes, case, message) -> None:
    bad, other = outcomes[1][case], outcomes[0][case]
    assert bad.startswith("InvalidArgumentError: ") and message in bad, bad
    assert "broken []" in bad, bad  # refused before anything was sent: its group is intact
    assert other.startswith("FabricTimeoutError: "), other
    assert "rank(s) 1" in other and "broken [1]" in other, other
