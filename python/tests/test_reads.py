"""Engine.single_read / paged_reads between processes on shm and tcp: byte-exact reads from a
peer's remote_read registration, and refused ranges and refused write-only memory that leave the
destination unchanged. What each provider's keys enforce against a forged descriptor is the C++
ReadTest's (docs/api.md#reads)."""

from __future__ import annotations

import numpy as np
import pytest

import fabric_lib as fl
from peers import STEP_S, Peer, pattern
from read_peers import read_source

N = 1 << 20
SEED = 29


def _open(provider: str) -> tuple[Peer, fl.MrDesc, fl.MrDesc]:
    peer = Peer(read_source, provider=provider, n=N, seed=SEED)
    readable, write_only = peer.recv()
    return peer, fl.MrDesc.from_bytes(readable), fl.MrDesc.from_bytes(write_only)


def _close(peer: Peer) -> None:
    peer.send("check")
    assert peer.recv() is True, "a READ changed its source"
    peer.send("bye")
    peer.close()


@pytest.mark.parametrize("num_shards", [0, 3])
def test_single_read_lands_exactly(provider: str, num_shards: int) -> None:
    with fl.Engine(provider) as engine:
        peer, src, _ = _open(provider)
        dst = np.zeros(N, np.uint8)
        handle, _ = engine.reg_mr(dst)
        length, src_offset, dst_offset = N // 2 + 3, 13, 4099
        t = engine.single_read(
            src, handle, length, src_offset=src_offset, dst_offset=dst_offset, num_shards=num_shards
        )
        assert isinstance(t, fl.Transfer)
        t.wait(STEP_S)
        expected = np.zeros(N, np.uint8)
        expected[dst_offset : dst_offset + length] = pattern(N, SEED)[src_offset : src_offset + length]
        np.testing.assert_array_equal(dst, expected)
        _close(peer)


def test_paged_reads_land_exactly(provider: str) -> None:
    page = 4096
    with fl.Engine(provider) as engine:
        peer, src, _ = _open(provider)
        dst = np.zeros(N, np.uint8)
        handle, _ = engine.reg_mr(dst)
        src_idx = np.array([7, 0, 200, 3], np.uint32)
        dst_idx = np.array([0, 9, 1, 100], np.uint32)
        engine.paged_reads(src, handle, page, src_idx, dst_idx, src_offset=5).wait(STEP_S)
        expected = np.zeros(N, np.uint8)
        source = pattern(N, SEED)
        for s, d in zip(src_idx, dst_idx):
            expected[d * page : (d + 1) * page] = source[5 + s * page : 5 + (s + 1) * page]
        np.testing.assert_array_equal(dst, expected)
        _close(peer)


def test_refused_reads_leave_the_destination_unchanged(provider: str) -> None:
    with fl.Engine(provider) as engine:
        peer, src, write_only = _open(provider)
        dst = np.zeros(N, np.uint8)
        handle, _ = engine.reg_mr(dst)
        with pytest.raises(fl.OutOfRangeError):
            engine.single_read(src, handle, 16, src_offset=N - 15)
        with pytest.raises(fl.OutOfRangeError):
            engine.paged_reads(src, handle, 4096, [N // 4096], [0])
        with pytest.raises(fl.InvalidArgumentError, match="remote_read"):
            engine.single_read(write_only, handle, 64)
        assert not dst.any()
        engine.single_read(src, handle, 64).wait(STEP_S)  # the engine still serves
        np.testing.assert_array_equal(dst[:64], pattern(N, SEED)[:64])
        _close(peer)

