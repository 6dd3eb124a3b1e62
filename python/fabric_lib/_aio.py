"""asyncio for transfers: ``await transfer`` resolves on the running loop with no thread per
request.

Each event loop gets one AsyncBridge: an eventfd the loop watches with ``add_reader``. Awaiting
a transfer registers a notifier on its completion; the engine thread that completes it queues
the transfer's token and writes the eventfd, without the GIL. The loop then takes the tokens and
resolves their futures. So 1,000 awaited transfers cost 1,000 futures and one file descriptor.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from ._native import AsyncBridge, Transfer


class _LoopBridge:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._bridge = AsyncBridge()
        self._pending: dict[int, tuple[asyncio.Future[None], Transfer]] = {}
        # One future per transfer: awaiting the same transfer twice shares it.
        self._futures: weakref.WeakKeyDictionary[Transfer, asyncio.Future[None]] = (
            weakref.WeakKeyDictionary()
        )
        # Weak: the loop owns the bridge (through its reader), not the other way round, so a
        # loop that is closed and dropped takes the bridge and its eventfd with it.
        self._loop = weakref.ref(loop)
        loop.add_reader(self._bridge.fd, self._take)

    def future(self, transfer: Transfer) -> asyncio.Future[None]:
        known = self._futures.get(transfer)
        if known is not None:
            return known
        token = self._bridge.watch(transfer)
        if token == 0:
            raise RuntimeError("this Transfer is already awaited on another event loop")
        loop = self._loop()
        assert loop is not None  # only called from inside the running loop
        fut: asyncio.Future[None] = loop.create_future()
        self._pending[token] = (fut, transfer)
        self._futures[transfer] = fut
        return fut

    def _take(self) -> None:
        for token in self._bridge.take():
            fut, transfer = self._pending.pop(token)
            if fut.done():  # cancelled by its awaiter
                continue
            error = transfer.exception(0)
            if error is None:
                fut.set_result(None)
            else:
                fut.set_exception(error)


_bridges: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopBridge] = (
    weakref.WeakKeyDictionary()
)


def future_of(transfer: Transfer) -> asyncio.Future[Any]:
    """The running loop's future for `transfer` (what ``await transfer`` awaits)."""
    loop = asyncio.get_running_loop()
    bridge = _bridges.get(loop)
    if bridge is None:
        bridge = _bridges[loop] = _LoopBridge(loop)
    return bridge.future(transfer)
