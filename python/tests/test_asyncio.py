"""Transfers are awaitable (docs/python.md, "asyncio"): ``await transfer`` on the running loop,
with one eventfd per loop and no thread per request; errors arrive as the request's FabricError.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import numpy as np
import pytest

import fabric_lib as fl
import fabric_lib._aio  # noqa: F401  (fl._aio below)

N_TRANSFERS = 1000
SLOT = 4096


def _pair(provider: str) -> tuple[fl.Engine, fl.Engine]:
    return fl.Engine(provider), fl.Engine(provider)


def test_a_thousand_concurrent_awaited_writes_land_byte_exact(provider: str) -> None:
    tx, rx = _pair(provider)
    with tx, rx:
        src = np.random.default_rng(5).integers(0, 256, N_TRANSFERS * SLOT, dtype=np.uint8)
        dst = np.zeros_like(src)
        src_h, _ = tx.reg_mr(src)
        _, dst_d = rx.reg_mr(dst)
        threads_before = threading.active_count()

        async def main() -> int:
            transfers = [
                tx.single_write(src_h, dst_d, SLOT, src_offset=i * SLOT, dst_offset=i * SLOT)
                for i in range(N_TRANSFERS)
            ]
            # Every one is awaited at once; none has a thread of its own.
            await asyncio.wait_for(asyncio.gather(*(_await(t) for t in transfers)), 120)
            assert all(t.done() for t in transfers)
            return threading.active_count()

        threads_during = asyncio.run(main())
        assert threads_during == threads_before
        assert np.array_equal(dst, src)


async def _await(t: fl.Transfer) -> None:
    await t


def test_awaiting_a_failed_transfer_raises_its_fabric_error() -> None:
    # A write to an engine that has stopped: the request fails, and await raises it.
    tx, rx = _pair("tcp")
    with tx:
        with rx:
            dst = np.zeros(SLOT, np.uint8)
            _, dst_d = rx.reg_mr(dst)
        src = np.ones(SLOT, np.uint8)
        src_h, _ = tx.reg_mr(src)

        async def main() -> None:
            with pytest.raises(fl.FabricError):
                await asyncio.wait_for(_await(tx.single_write(src_h, dst_d, SLOT)), 60)

        asyncio.run(main())


@pytest.fixture
def tcp_slot() -> Iterator[tuple[fl.Engine, fl.MrHandle, fl.MrDesc, np.ndarray, np.ndarray]]:
    """Two tcp engines and one registered slot each: (writer, source, destination desc, src, dst)."""
    tx, rx = _pair("tcp")
    with tx, rx:
        src = np.arange(SLOT, dtype=np.uint8)
        dst = np.zeros_like(src)
        src_h, _ = tx.reg_mr(src)
        _, dst_d = rx.reg_mr(dst)
        yield tx, src_h, dst_d, src, dst


def test_a_transfer_done_before_it_is_awaited_resolves_and_can_be_awaited_twice(tcp_slot) -> None:
    tx, src_h, dst_d, src, dst = tcp_slot
    t = tx.single_write(src_h, dst_d, SLOT)
    t.wait(60)

    async def main() -> None:
        await asyncio.wait_for(_await(t), 60)
        await asyncio.wait_for(_await(t), 60)

    asyncio.run(main())
    assert np.array_equal(dst, src)


def test_a_pending_transfer_awaited_on_a_second_loop_is_refused(tcp_slot) -> None:
    tx, src_h, dst_d, _, _ = tcp_slot
    # The flag completes only after the callback returns: held until the end of the test.
    release = threading.Event()
    t = tx.single_write(src_h, dst_d, SLOT, callback=lambda _err: release.wait(60))

    first = asyncio.new_event_loop()
    try:

        async def watch() -> asyncio.Future[None]:
            return fl._aio.future_of(t)

        pending = first.run_until_complete(watch())
        assert not t.done()

        async def second() -> None:
            with pytest.raises(RuntimeError, match="another event loop"):
                await t

        asyncio.run(second())
        release.set()
        first.run_until_complete(asyncio.wait_for(pending, 60))
    finally:
        release.set()
        first.close()
    # Once done, it may be awaited anywhere.
    asyncio.run(asyncio.wait_for(_await(t), 60))
