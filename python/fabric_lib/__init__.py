"""fabric_lib: zero-copy RDMA writes between processes, with completion counted by immediates.

Python binding of fabric-lib's TransferEngine; docs/python.md describes it and docs/api.md the
engine's contract.
"""

from __future__ import annotations

import time as _time
import typing as _typing

from ._native import (
    MAX_WRITE_BYTES,
    AgainError,
    CancelledError,
    Channel,
    Engine,
    FabricError,
    FabricTimeoutError,
    ImmCounter,
    ImmReservation,
    InvalidArgumentError,
    MalformedError,
    MrDesc,
    MrHandle,
    NetAddr,
    NotFoundError,
    OutOfRangeError,
    PeerGroup,
    PeerWatch,
    ProviderError,
    ScatterSlice,
    ShutdownError,
    Transfer,
    UnsupportedError,
    Watcher,
    __version__,
    library_threads,
    paged_writes_imm_count,
    scatter_imm_count,
    single_write_imm_count,
)
from ._signals import restore_interpreter_handlers

# Loading _native (libfabric) replaced the interpreter's signal handlers; see _signals.py.
restore_interpreter_handlers()
del restore_interpreter_handlers

from ._store import all_gather_bytes  # noqa: E402

if _typing.TYPE_CHECKING:
    from typing import Iterable


def wait_all(transfers: Iterable[Transfer], timeout: float | None = None) -> None:
    """Waits for every transfer, raising the first error met, within one overall timeout."""
    deadline = None if timeout is None else _time.monotonic() + timeout
    for t in transfers:
        t.wait(None if deadline is None else max(0.0, deadline - _time.monotonic()))


__all__ = [
    "MAX_WRITE_BYTES",
    "AgainError",
    "CancelledError",
    "Channel",
    "Engine",
    "FabricError",
    "FabricTimeoutError",
    "ImmCounter",
    "ImmReservation",
    "InvalidArgumentError",
    "MalformedError",
    "MrDesc",
    "MrHandle",
    "NetAddr",
    "NotFoundError",
    "OutOfRangeError",
    "PeerGroup",
    "PeerWatch",
    "ProviderError",
    "ScatterSlice",
    "ShutdownError",
    "Transfer",
    "UnsupportedError",
    "Watcher",
    "__version__",
    "all_gather_bytes",
    "library_threads",
    "paged_writes_imm_count",
    "scatter_imm_count",
    "single_write_imm_count",
    "wait_all",
]

# The __future__ import binds a module attribute; dir(fabric_lib) lists only the API.
del annotations
