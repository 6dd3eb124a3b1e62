"""Exchanging addresses and descriptors through a key-value store (torch.distributed's
TCPStore, or anything with set(key, bytes) and a blocking get(key))."""

from __future__ import annotations

from typing import Any, Protocol


class KeyValueStore(Protocol):
    def set(self, key: str, value: bytes) -> Any: ...

    def get(self, key: str) -> bytes: ...


def all_gather_bytes(
    store: KeyValueStore, key: str, rank: int, world_size: int, value: bytes
) -> list[bytes]:
    """Publishes `value` as this rank's share of `key` and returns every rank's, in rank order.

    Blocks in store.get until each rank has published, for as long as the store's own
    timeout allows (TCPStore's, 300 s by default, or what it was created with).
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in [0, {world_size})")
    store.set(f"{key}/{rank}", bytes(value))
    return [bytes(store.get(f"{key}/{r}")) for r in range(world_size)]
