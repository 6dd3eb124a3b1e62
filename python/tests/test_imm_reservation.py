"""Engine.reserve_imms: blocks that never overlap, checks that name the owner, released on exit."""

from __future__ import annotations

import pytest

import fabric_lib as fl


def test_blocks_of_workloads_sharing_an_engine_do_not_overlap() -> None:
    with fl.Engine("tcp") as engine:
        with engine.reserve_imms(64, "kv") as kv, engine.reserve_imms(8, "weights") as weights:
            assert kv.first >= 1 << 20 and weights.first >= 1 << 20
            assert weights.first not in kv and kv.first not in weights
            assert kv.at(63) in kv
            kv.check(kv.at(0))
            with pytest.raises(fl.InvalidArgumentError, match='"kv"'):
                kv.check(weights.first)
            with pytest.raises(fl.OutOfRangeError):
                kv.at(64)
            with pytest.raises(fl.InvalidArgumentError, match='"kv" holds'):
                engine.reserve_imms(1, "kv")
        assert kv.count == 0  # released on leaving the block
        again = engine.reserve_imms(64, "kv")  # the name is free again
        # Next fit: past the last block handed out, not on the values just released (a write
        # still in flight for their old owner would count for the new one).
        assert again.first >= weights.first + 8


def test_reserving_after_stop_is_a_shutdown_error() -> None:
    engine = fl.Engine("tcp")
    engine.stop()
    with pytest.raises(fl.ShutdownError):
        engine.reserve_imms(1, "late")
