"""The all_gather a group is built with, over a key-value store (torch.distributed's TCPStore)."""

from __future__ import annotations

from typing import Any, Callable

from .._store import all_gather_bytes


def store_all_gather(store: Any, rank: int, world_size: int, key: str) -> Callable[[bytes], list[bytes]]:
    """Returns f(blob) -> every rank's blob; each call uses its own round of keys under `key`."""
    rounds = [0]

    def gather(blob: bytes) -> list[bytes]:
        rounds[0] += 1
        return all_gather_bytes(store, f"{key}/{rounds[0]}", rank, world_size, blob)

    return gather
