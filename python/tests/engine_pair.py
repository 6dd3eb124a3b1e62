"""Two shm engines in this process, a writer and its target, for tests of the engine's calls."""

from __future__ import annotations

import contextlib
from typing import Iterator

import numpy as np

import fabric_lib as fl

PAIR_BYTES = 1 << 16
STEP_S = 30.0  # the longest one transfer between the two may take


@contextlib.contextmanager
def shm_pair(length: int = PAIR_BYTES, domains: int = 1) -> Iterator[tuple]:
    """Yields (writer, target, writer's source handle, target's destination desc, destination
    array); the source holds 0, 1, 2, ... (mod 256), the destination zeros."""
    # The target (b) first, so the writer (a) stops first: on shm, a write to a stopped engine
    # of the same process crashes inside libfabric (docs/python.md, known limits).
    with fl.Engine("shm", domains) as b, fl.Engine("shm", domains) as a:
        src = np.arange(length, dtype=np.uint8)
        dst = np.zeros(length, np.uint8)
        hs, _ = a.reg_mr(src)
        _, dd = b.reg_mr(dst)
        yield a, b, hs, dd, dst
