"""The proxy's upstream servers of one kind (prefill or decode) and how one is picked per request.

round-robin: each in turn. least-loaded: the one with the fewest requests this proxy has in
flight on it (ties in turn), which keeps a slow server from collecting a queue while others idle.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

POLICIES = ("round-robin", "least-loaded")


@dataclass
class Upstream:
    url: str  # base URL, no trailing slash: "http://127.0.0.1:8100"
    in_flight: int = 0


class Pool:
    def __init__(self, urls: list[str], policy: str) -> None:
        if not urls:
            raise ValueError("a pool needs at least one server URL")
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, not {policy!r}")
        self.upstreams = [Upstream(u.rstrip("/")) for u in urls]
        self._policy = policy
        self._next = 0  # the round-robin cursor; also breaks least-loaded ties in turn

    def pick(self) -> Upstream:
        n = len(self.upstreams)
        order = [self.upstreams[(self._next + i) % n] for i in range(n)]
        chosen = order[0] if self._policy == "round-robin" else min(order, key=lambda u: u.in_flight)
        self._next = (self.upstreams.index(chosen) + 1) % n
        return chosen

    @contextmanager
    def use(self) -> Iterator[Upstream]:
        """Picks one and counts the request in flight on it until the block ends."""
        with self.track(self.pick()) as upstream:
            yield upstream

    @contextmanager
    def track(self, upstream: Upstream) -> Iterator[Upstream]:
        """Counts a request in flight on a given upstream until the block ends."""
        upstream.in_flight += 1
        try:
            yield upstream
        finally:
            upstream.in_flight -= 1
