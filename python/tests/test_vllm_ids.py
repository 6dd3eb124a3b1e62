"""fabric_lib.vllm._ids: the ids the vLLM connector uses on the wire. Malformed
kv_transfer_params are refused with one clear error (the request then runs locally), and two
requests that share a fabric_id but not their prompt never share a wire id (no vLLM needed)."""

from __future__ import annotations

import pytest

from fabric_lib.vllm._ids import BadTransferParams, fabric_id, producer_id, wire_id


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


def test_a_remote_decode_request_takes_vllms_request_id() -> None:
    # What a proxy sends the producer (fabric_lib.vllm.proxy, like vLLM's own proxies).
    asked = {"do_remote_decode": True, "do_remote_prefill": False}
    assert producer_id(asked, "cmpl-abc-0") == "cmpl-abc-0"
    assert producer_id({**asked, "fabric_id": "mine"}, "cmpl-abc-0") == "mine"  # a given one wins
    assert producer_id({"do_remote_decode": False}, "cmpl-abc-0") is None
    assert producer_id(None, "cmpl-abc-0") is None
    long_a, long_b = producer_id(asked, "a" * 300), producer_id(asked, "a" * 299 + "b")
    assert long_a != long_b and len(long_a.encode()) <= 200  # hashed, still within the limit
    with pytest.raises(BadTransferParams):
        producer_id({**asked, "fabric_id": ["x"]}, "cmpl-abc-0")
