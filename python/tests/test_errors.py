"""Rejected requests raise the FabricError subclass of their Errc, and send nothing."""

from __future__ import annotations

import os

import numpy as np
import pytest

import fabric_lib as fl
from engine_pair import PAIR_BYTES as N
from engine_pair import shm_pair


@pytest.fixture()
def pair():
    with shm_pair() as p:
        yield p


def test_error_hierarchy() -> None:
    codes = {
        fl.InvalidArgumentError: "invalid_argument",
        fl.OutOfRangeError: "out_of_range",
        fl.MalformedError: "malformed",
        fl.AgainError: "again",
        fl.FabricTimeoutError: "timeout",
        fl.ProviderError: "provider",
        fl.UnsupportedError: "unsupported",
        fl.NotFoundError: "not_found",
        fl.ShutdownError: "shutdown",
        fl.CancelledError: "cancelled",
    }
    for cls, errc in codes.items():
        assert issubclass(cls, fl.FabricError) and cls.errc == errc
        assert cls.__module__ == "fabric_lib"
    assert issubclass(fl.FabricTimeoutError, TimeoutError)
    assert issubclass(fl.OutOfRangeError, ValueError)
    assert issubclass(fl.NotFoundError, LookupError)


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(length=N + 1), "length"),
        (dict(length=16, src_offset=N), "offset"),
        (dict(length=16, dst_offset=N - 8), "offset"),
        (dict(length=1, dst_offset=-1), "negative"),
        (dict(length=-5), "negative"),
    ],
)
def test_bad_ranges_raise_out_of_range(pair, kwargs: dict, needle: str) -> None:
    a, b, hs, dd, dst = pair
    length = kwargs.pop("length")
    with pytest.raises(fl.OutOfRangeError, match=needle):
        a.single_write(hs, dd, length, imm=1, **kwargs)
    assert b.imm_counter(1).value == 0 and not dst.any()  # nothing was sent


def test_bad_pages_raise(pair) -> None:
    a, b, hs, dd, _ = pair
    pages = N // 4096
    with pytest.raises(fl.OutOfRangeError):
        a.paged_writes(hs, dd, 4096, [0, pages], [0, 1])
    with pytest.raises(fl.OutOfRangeError):
        a.paged_writes(hs, dd, 4096, [0], [0], dst_offset=N - 4095)
    with pytest.raises(fl.OutOfRangeError, match="page index"):
        a.paged_writes(hs, dd, 4096, [-1], [0])
    with pytest.raises(fl.InvalidArgumentError):
        a.paged_writes(hs, dd, 4096, [0, 1], [0])
    with pytest.raises(TypeError):
        a.paged_writes(hs, dd, 4096, "01", [0, 1])  # type: ignore[arg-type]


def test_bad_descriptors_and_handles(pair) -> None:
    a, b, hs, dd, _ = pair
    # A handle registered by another engine is not ours to write from.
    hb, _ = b.reg_mr(np.zeros(16, np.uint8))
    with pytest.raises(fl.InvalidArgumentError):
        a.single_write(hb, dd, 16)
    a.dereg_mr(hs)
    assert not hs.valid
    with pytest.raises(fl.InvalidArgumentError):
        a.single_write(hs, dd, 16)
    with pytest.raises(fl.MalformedError):
        fl.MrDesc.from_bytes(bytes(dd)[:-3])


def test_unknown_peers_and_groups(pair) -> None:
    a, b, hs, dd, _ = pair
    with fl.Engine("shm", 2) as two_domains, fl.Engine("tcp") as tcp:
        for stranger in (two_domains.main_address, tcp.main_address):
            with pytest.raises(fl.InvalidArgumentError):
                a.add_peer_group([stranger])
            with pytest.raises(fl.InvalidArgumentError):
                a.send(stranger, b"hi")
        # Groups are per engine, and `a` has none yet: another engine's is unknown here.
        foreign_group = two_domains.add_peer_group([two_domains.main_address])
    with pytest.raises(fl.NotFoundError):
        a.barrier(1, [dd], group=foreign_group)
    group = a.add_peer_group([b.main_address, b.main_address])
    with pytest.raises(fl.InvalidArgumentError):
        a.barrier(1, [dd], group=group)  # two peers in the group, one destination
    with pytest.raises(fl.InvalidArgumentError):
        a.add_peer_group([])


def test_bad_arguments(pair) -> None:
    a, b, hs, dd, _ = pair
    with pytest.raises(fl.InvalidArgumentError):
        a.single_write(hs, dd, 16, imm=1 << 32)
    with pytest.raises(fl.InvalidArgumentError):
        a.single_write(hs, dd, 16, num_shards=2, domain=0)
    with pytest.raises(fl.InvalidArgumentError):
        a.single_write(hs, dd, 16, domain=1)  # one Domain only
    with pytest.raises(fl.InvalidArgumentError):
        a.send(b.main_address, bytes(a.max_message_size + 1))
    with pytest.raises(fl.InvalidArgumentError):
        a.submit_recvs(a.max_message_size - 1, 4, lambda m: None)
    with pytest.raises(TypeError):
        a.submit_recvs(a.max_message_size, 4, None)  # type: ignore[arg-type]
    with pytest.raises(fl.InvalidArgumentError):
        a.scatter(hs, [(dd, 16)], routing="sideways")
    with pytest.raises(TypeError):
        a.single_write(hs, dd, 16, callback=42)  # type: ignore[arg-type]


def test_reg_mr_rejects_unusable_memory() -> None:
    with fl.Engine("shm") as e:
        with pytest.raises(fl.InvalidArgumentError, match="read-only"):
            e.reg_mr(b"immutable bytes")
        with pytest.raises(fl.InvalidArgumentError, match="contiguous"):
            e.reg_mr(np.zeros((64, 64), np.uint8)[:, ::2])
        ro = np.zeros(64, np.uint8)
        ro.flags.writeable = False
        with pytest.raises(fl.InvalidArgumentError, match="read-only"):
            e.reg_mr(ro)
        with pytest.raises(fl.InvalidArgumentError):
            e.reg_mr(np.zeros(0, np.uint8))
        with pytest.raises(TypeError):
            e.reg_mr("a string")
        with pytest.raises(fl.InvalidArgumentError):
            e.reg_mr(0x1000)  # a raw pointer needs a length
        with pytest.raises(fl.InvalidArgumentError):
            e.reg_mr(np.zeros(64, np.uint8), 64)  # a buffer carries its own length
        with pytest.raises(fl.InvalidArgumentError):
            e.reg_mr(0x1000, 64, "tpu:0")


def test_counter_errors() -> None:
    with fl.Engine("shm") as e:
        c = e.imm_counter(9)
        with pytest.raises(fl.InvalidArgumentError):
            e.imm_counter(9)
        with pytest.raises(fl.InvalidArgumentError):
            e.expect_imm_count(9, 1, lambda imm, n: None)
        with pytest.raises(fl.FabricTimeoutError):
            c.wait(1, timeout=0.05)
        with pytest.raises(TimeoutError):  # also a builtin TimeoutError
            c.wait_and_consume(1, timeout=0)
        with pytest.raises(fl.InvalidArgumentError):
            c.wait(1, timeout=-1)
        e.release_imm_counter(9)
        with pytest.raises(fl.NotFoundError):
            e.release_imm_counter(9)


def test_stopped_engine_raises_shutdown(pair) -> None:
    a, b, hs, dd, _ = pair
    a.stop()
    a.stop()  # idempotent
    assert a.stopped
    with pytest.raises(fl.ShutdownError):
        a.single_write(hs, dd, 16)
    with pytest.raises(fl.ShutdownError):
        a.reg_mr(np.zeros(16, np.uint8))
    assert not hs.valid
    assert a.main_address.provider == "shm"  # values outlive the engine


def test_bad_engine_config() -> None:
    with pytest.raises(fl.FabricError):
        fl.Engine("no-such-provider")
    with pytest.raises(fl.InvalidArgumentError):
        fl.Engine("shm", max_message_size=0)
    with pytest.raises(fl.InvalidArgumentError):
        fl.Engine("shm", domains_per_group=-1)


def test_backend_choice_is_checked() -> None:
    with pytest.raises(ValueError):
        fl.Engine("shm", backend="no-such-backend")
    if not os.path.exists("/sys/class/infiniband") or not os.listdir("/sys/class/infiniband"):
        # No verbs device here: the verbs backend says so instead of starting.
        with pytest.raises(fl.UnsupportedError, match="verbs"):
            fl.Engine(backend="verbs")
