"""How many immediates a request produces at the receiver (docs/api.md, "Immediate counts").

The count depends only on the request and the number of Domains K, so a receiver computes
what to wait for with these instead of hard-coding it.
"""

from __future__ import annotations

from ._native import MAX_WRITE_BYTES


def _writes_for(length: int) -> int:
    # A piece longer than MAX_WRITE_BYTES is split, each part carrying the imm; an empty
    # piece still sends one WRITE so the imm arrives.
    return max(1, -(-length // MAX_WRITE_BYTES))


def single_write_imm_count(
    length: int, num_domains: int, *, num_shards: int = 0, domain: int | None = None
) -> int:
    """Immediates one Engine.single_write with an imm delivers, routed as given."""
    if length < 0 or num_domains < 1 or num_shards < 0:
        raise ValueError("length >= 0, num_domains >= 1 and num_shards >= 0 are required")
    k = 1 if domain is not None else (num_shards or num_domains)
    base, extra = divmod(length, k)
    return sum(_writes_for(base + (1 if i < extra else 0)) for i in range(k))


def paged_writes_imm_count(num_pages: int) -> int:
    """Immediates one Engine.paged_writes with an imm delivers: one per page."""
    return num_pages


def scatter_imm_count(length: int, num_domains: int, routing: str | int = "peers") -> int:
    """Immediates each receiving peer sees for its slice of `length` bytes of a scatter."""
    if routing == "bytes":
        return single_write_imm_count(length, num_domains)
    return _writes_for(length)
