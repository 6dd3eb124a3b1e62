"""The consumer's producers: named by the request (fabric_address, what the producer returned)
or by the address file, connected on first use, and connected again when a producer restarted
(a new address) or the cached one died.

The producer writes its address atomically each time it starts, so re-reading the file is how a
consumer learns of a restart without being restarted itself. Receiver.connect returns at once
for a producer it already knows (alive or failed), so asking again per step is cheap.
"""

from __future__ import annotations

import logging
import os

import fabric_lib as fl
import fabric_lib.kv as fkv


class SourceUnavailable(fl.FabricError):
    """No usable producer right now: the request fails (or is recomputed), the engine goes on."""


class ProducerSource:
    def __init__(self, receiver: fkv.Receiver, address_file: str | None, connect_timeout_s: float,
                 logger: logging.Logger) -> None:
        self._receiver = receiver
        self._file = address_file
        self._timeout = connect_timeout_s
        self._log = logger
        self._known: dict[bytes, int] = {}  # producer address -> source index

    def _read(self) -> bytes:
        if not self._file:
            raise SourceUnavailable("the request carries no fabric_address and no address_file "
                                    "is configured")
        try:
            with open(self._file) as f:
                return bytes.fromhex(f.read().strip())
        except FileNotFoundError:
            raise SourceUnavailable(f"no producer address in {self._file} (not started?)") from None
        except (OSError, ValueError) as e:
            raise SourceUnavailable(f"unreadable producer address in {self._file}: {e}") from None

    def get(self, address: bytes | None = None) -> int:
        """The source index of `address`, or of the producer the address file names now,
        connecting on first use."""
        if address is None:
            address = self._read()
        index = self._known.get(address)
        if index is not None:
            return index
        try:
            index = self._receiver.connect(address, self._timeout)
        except fl.FabricError as e:
            hint = ""
            if "different model" in str(e):
                # The connector's layout folds block_size into each entry (whole blocks move).
                hint = " (both instances need the same model, dtype and block_size)"
            raise SourceUnavailable(f"cannot connect to the producer: {e}{hint}") from e
        self._log.info("FabricConnector consumer: connected to a producer (source %d)", index)
        self._known[address] = index
        return index

    def forget(self) -> None:
        """A producer failed a request: look producers up (and connect) afresh next time; a
        live one answers again at once, a dead one fails at once."""
        self._known.clear()

    def wait_for_file(self, timeout_s: float) -> None:
        """At start-up: the producer may still be loading. Bounded; never raises."""
        import time

        if not self._file:
            return
        deadline = time.monotonic() + timeout_s
        while not os.path.exists(self._file) and time.monotonic() < deadline:
            time.sleep(0.1)
