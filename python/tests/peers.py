"""Peer processes for the multi-process tests.

A Peer is a spawned child that runs one role function from this module and talks to the test
over a Pipe. Every receive on either side is bounded, and a child that fails sends its
traceback back instead of leaving the test to time out.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from typing import Any, Callable

import numpy as np

STEP_S = 60.0  # the longest any single step may take, spawning a peer that imports torch included
CTX = mp.get_context("spawn")

# Engine settings for a process a test kills: it polls rarely while idle. Killed inside its own
# shm poll it would leave its region's process-shared lock held, and every peer writing to it
# would spin inside the provider for good (docs/reliability.md#shm-locks; the C++ tests use
# fabric_test/victim.hpp).
VICTIM_IDLE = dict(idle_spin_us=0, idle_yield_us=0, idle_sleep_us=20000)


def wait_until_quiet(outstanding: Callable[[], int], timeout: float = 10.0) -> None:
    """Returns once `outstanding()` is 0, or after `timeout` s: a victim is killed then, not
    inside a post into a peer's shm region (which would leave that region's lock held)."""
    deadline = time.monotonic() + timeout
    while outstanding() and time.monotonic() < deadline:
        time.sleep(0.001)


class PeerFailed(AssertionError):
    pass


class _Failure:
    def __init__(self, text: str) -> None:
        self.text = text


def expect(conn: Any, timeout: float = STEP_S) -> Any:
    if not conn.poll(timeout):
        raise TimeoutError(f"no message from the other side within {timeout} s")
    msg = conn.recv()
    if isinstance(msg, _Failure):
        raise PeerFailed(f"the peer failed:\n{msg.text}")
    return msg


def _main(role: Callable[..., None], conn: Any, kwargs: dict[str, Any]) -> None:
    try:
        role(conn, **kwargs)
    except BaseException:  # noqa: BLE001 - everything goes back to the test
        conn.send(_Failure(traceback.format_exc()))
    finally:
        conn.close()


class Peer:
    def __init__(self, role: Callable[..., None], **kwargs: Any) -> None:
        self.conn, child = CTX.Pipe()
        self.proc = CTX.Process(target=_main, args=(role, child, kwargs), daemon=True)
        self.proc.start()
        child.close()

    def send(self, msg: Any) -> None:
        self.conn.send(msg)

    def recv(self, timeout: float = STEP_S) -> Any:
        return expect(self.conn, timeout)

    def close(self) -> None:
        self.proc.join(STEP_S)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(STEP_S)
            raise PeerFailed("the peer did not exit and was killed")
        self.conn.close()
        if self.proc.exitcode != 0:
            raise PeerFailed(f"the peer exited with {self.proc.exitcode}")

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None:
            self.proc.kill()
        self.close()


# ------------------------------------------------------------------ buffers


def pattern(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def make_buffer(kind: str, n: int, seed: int | None) -> tuple[Any, np.ndarray]:
    """A buffer of n bytes (filled from seed, or zeroed) and a numpy view of its bytes."""
    data = pattern(n, seed) if seed is not None else np.zeros(n, np.uint8)
    if kind == "numpy":
        return data, data
    if kind.startswith("torch"):
        import torch

        if kind == "torch-float32":
            t = torch.from_numpy(data.view(np.float32).copy())
        else:
            t = torch.empty(n, dtype=torch.uint8)
            t.copy_(torch.from_numpy(data))
        return t, t.numpy().view(np.uint8)
    raise ValueError(kind)


# ------------------------------------------------------------------ roles


def writer(conn: Any, provider: str, kind: str, op: str, n: int, seed: int, imm: int) -> None:
    """Receives the target's MrDesc, writes into it with `op`, reports the Transfer's outcome."""
    import fabric_lib as fl

    with fl.Engine(provider) as engine:
        obj, _ = make_buffer(kind, n, seed)
        handle, _ = engine.reg_mr(obj)
        dst = fl.MrDesc.from_bytes(expect(conn))
        if op == "single":
            t = engine.single_write(handle, dst, n, imm=imm)
        elif op == "single_offsets":
            t = engine.single_write(
                handle, dst, n // 2, src_offset=n // 4, dst_offset=n // 2, imm=imm
            )
        elif op == "single_sharded":
            t = engine.single_write(handle, dst, n, imm=imm, num_shards=3)
        elif op == "paged":
            pages = n // PAGE
            src_idx = np.arange(pages, dtype=np.uint32)
            dst_idx = np.array(paged_destinations(pages), dtype=np.uint32)
            t = engine.paged_writes(handle, dst, PAGE, src_idx, dst_idx, imm=imm)
        elif op == "imm":
            t = engine.imm(imm, dst)
        else:
            raise ValueError(op)
        t.wait(STEP_S)
        conn.send("written")
        expect(conn)  # keep the source registered until the target has checked


PAGE = 4096


def paged_destinations(pages: int) -> list[int]:
    # Reversed, so a write that ignored the indices would be caught.
    return list(reversed(range(pages)))


def sender(conn: Any, provider: str, messages: list[bytes]) -> None:
    """Receives the target's NetAddr and SENDs it every message."""
    import fabric_lib as fl

    with fl.Engine(provider) as engine:
        to = fl.NetAddr.from_bytes(expect(conn))
        fl.wait_all([engine.send(to, m) for m in messages], timeout=STEP_S)
        conn.send("sent")
        expect(conn)


def receiver(conn: Any, provider: str, kind: str, n: int, imm: int, expected_imms: int) -> None:
    """Registers a zeroed buffer, publishes (NetAddr, MrDesc), and returns its bytes once
    `expected_imms` immediates have landed."""
    import fabric_lib as fl

    with fl.Engine(provider) as engine:
        obj, view = make_buffer(kind, n, None)
        _, desc = engine.reg_mr(obj)
        counter = engine.imm_counter(imm)
        conn.send((bytes(engine.main_address), bytes(desc)))
        counter.wait_and_consume(expected_imms, timeout=STEP_S)
        conn.send(view.tobytes())
        expect(conn)  # the writer is done with us


# ------------------------------------------------------------------ the test's side

SEED = 20240607
IMM = 0x5EED


def expected_imms(op: str, n: int) -> int:
    import fabric_lib as fl

    if op == "single" or op == "single_offsets":
        return fl.single_write_imm_count(n, 1)
    if op == "single_sharded":
        return fl.single_write_imm_count(n, 1, num_shards=3)
    if op == "paged":
        return fl.paged_writes_imm_count(n // PAGE)
    if op == "imm":
        return 1
    raise ValueError(op)


def expected_bytes(op: str, n: int) -> np.ndarray:
    src = pattern(n, SEED)
    out = np.zeros(n, np.uint8)
    if op in ("single", "single_sharded"):
        out[:] = src
    elif op == "single_offsets":
        out[n // 2 :] = src[n // 4 : n // 4 + n // 2]
    elif op == "paged":
        for i, d in enumerate(paged_destinations(n // PAGE)):
            out[d * PAGE : (d + 1) * PAGE] = src[i * PAGE : (i + 1) * PAGE]
    return out


def run_write_case(provider: str, kind: str, op: str, n: int = 1 << 20) -> None:
    """This process is the target; a peer writes into it with `op`. Checks every byte and the
    number of immediates."""
    import fabric_lib as fl

    with fl.Engine(provider) as engine:
        obj, view = make_buffer(kind, n, None)
        _, desc = engine.reg_mr(obj)
        counter = engine.imm_counter(IMM)
        with Peer(writer, provider=provider, kind=kind, op=op, n=n, seed=SEED, imm=IMM) as peer:
            peer.send(bytes(desc))
            assert peer.recv() == "written"
            counter.wait_and_consume(expected_imms(op, n), timeout=STEP_S)
            np.testing.assert_array_equal(view, expected_bytes(op, n))
            assert counter.value == 0
            peer.send("bye")


def dist_rank(conn: Any, rank: int, world_size: int, port: int, provider: str) -> None:
    """One rank of a gloo job: addresses and descriptors go through the process group's store,
    tensors move one-sided, and gloo's all_gather checks the result."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    import fabric_lib as fl

    store = dist.TCPStore(
        "127.0.0.1", port, world_size, rank == 0, timeout=timedelta(seconds=STEP_S)
    )
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size)
    try:
        with fl.Engine(provider) as engine:
            n = 1 << 18
            outbox = torch.arange(n, dtype=torch.float32) + rank * 1e6
            inbox = torch.zeros(n, dtype=torch.float32)
            src, _ = engine.reg_mr(outbox)
            _, inbox_desc = engine.reg_mr(inbox)
            counter = engine.imm_counter(IMM)
            addrs = fl.all_gather_bytes(
                store, "fabric/addr", rank, world_size, bytes(engine.main_address)
            )
            descs = fl.all_gather_bytes(store, "fabric/inbox", rank, world_size, bytes(inbox_desc))
            descs_ = [fl.MrDesc.from_bytes(d) for d in descs]
            assert [d.owner for d in descs_] == [fl.NetAddr.from_bytes(a) for a in addrs]

            # First half in one WRITE, second half as pages in reverse order, to the next rank.
            right, left = (rank + 1) % world_size, (rank - 1) % world_size
            half = n * 4 // 2
            engine.single_write(src, descs_[right], half, imm=IMM).wait(STEP_S)
            pages = half // PAGE
            engine.paged_writes(
                src,
                descs_[right],
                PAGE,
                list(range(pages)),
                list(range(pages)),
                src_offset=half,
                dst_offset=half,
                imm=IMM,
            ).wait(STEP_S)
            counter.wait_and_consume(1 + pages, timeout=STEP_S)

            gathered = [torch.empty_like(outbox) for _ in range(world_size)]
            dist.all_gather(gathered, outbox)
            assert torch.equal(inbox, gathered[left])
            dist.barrier()  # no engine stops while a peer may still write into it
        conn.send("ok")
    finally:
        dist.destroy_process_group()
