"""fabric_lib.vllm._ids: the ids the vLLM connector uses on the wire. Malformed
kv_transfer_params are refused with one clear error (the request then runs locally), and two
requests that share a fabric_id but not their prompt never share a wire id (no vLLM needed)."""

from __future__ import annotations

import pytest

from fabric_lib.vllm._ids import BadTransferParams, fabric_id, wire_id


def test_no_transfer_asked() -> None:
    assert fabric_id(None) is None
    assert fabric_id({}) is None
    assert fabric_id({"other": 1}) is None


@pytest.mark.parametrize("params", [["x"], "x", {"fabric_id": ["x"]}, {"fabric_id": True},
                                    {"fabric_id": ""}, {"fabric_id": "x" * 201}])
def test_malformed_params_are_refused(params) -> None:
    with pytest.raises(BadTransferParams):
        fabric_id(params)
    assert issubclass(BadTransferParams, ValueError)


def test_wire_ids_follow_the_prompt() -> None:
    assert fabric_id({"fabric_id": 7}) == "7"
    a = wire_id("req", [1, 2, 3])
    assert a == wire_id("req", [1, 2, 3])  # both instances compute the same
    assert a != wire_id("req", [1, 2, 4])  # a reused id with another prompt does not collide
    assert a.startswith("req#")
    assert len(wire_id("x" * 200, list(range(5000))).encode()) <= 256  # the kv module's limit
