"""NetAddr and MrDesc as values: bytes, text and pickle round trips, equality, decoding errors."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import fabric_lib as fl


@pytest.fixture(scope="module")
def engine():
    with fl.Engine("shm") as e:
        yield e


@pytest.fixture(scope="module")
def desc(engine: fl.Engine) -> fl.MrDesc:
    return engine.reg_mr(np.zeros(4096, np.uint8))[1]


def test_net_addr_round_trips(engine: fl.Engine) -> None:
    addr = engine.main_address
    assert fl.NetAddr.from_bytes(bytes(addr)) == addr
    assert fl.NetAddr.from_bytes(bytearray(bytes(addr))) == addr
    assert fl.NetAddr.from_bytes(memoryview(bytes(addr))) == addr
    assert fl.NetAddr.parse(str(addr)) == addr
    assert str(addr).startswith("fna3:")
    assert pickle.loads(pickle.dumps(addr)) == addr
    assert copy.deepcopy(addr) == addr
    assert hash(fl.NetAddr.parse(str(addr))) == hash(addr)
    assert addr.provider == "shm" and addr.backend == "libfabric"
    assert addr.num_domains == engine.num_domains == 1
    assert addr.max_message_size == engine.max_message_size
    assert addr != fl.Engine("shm").main_address  # a new engine is a new instance
    assert addr != "fna3:" and (addr == object()) is False


def test_mr_desc_round_trips(engine: fl.Engine, desc: fl.MrDesc) -> None:
    assert fl.MrDesc.from_bytes(bytes(desc)) == desc
    assert fl.MrDesc.parse(str(desc)) == desc
    assert str(desc).startswith("fmd3:")
    assert pickle.loads(pickle.dumps(desc, protocol=pickle.HIGHEST_PROTOCOL)) == desc
    assert {desc: 1}[fl.MrDesc.parse(str(desc))] == 1
    assert desc.size == 4096
    assert desc.owner == engine.main_address
    assert len(desc.keys) == 1 and all(isinstance(k, int) for k in desc.keys[0])


@pytest.mark.parametrize("cls", [fl.NetAddr, fl.MrDesc])
@pytest.mark.parametrize("data", [b"", b"x", b"FNA\x01", b"FMD\x01" + b"\0" * 8, bytes(300)])
def test_malformed_bytes_raise(cls: type, data: bytes) -> None:
    with pytest.raises(fl.MalformedError):
        cls.from_bytes(data)


@pytest.mark.parametrize("cls,prefix", [(fl.NetAddr, "fna3:"), (fl.MrDesc, "fmd3:")])
@pytest.mark.parametrize("tail", ["", "zz", "0", "00ff"])
def test_malformed_text_raises(cls: type, prefix: str, tail: str) -> None:
    with pytest.raises(fl.MalformedError) as info:
        cls.parse(prefix + tail)
    assert str(info.value)  # the message says what was wrong


def test_truncated_and_extended_encodings_raise(engine: fl.Engine, desc: fl.MrDesc) -> None:
    for value, cls in [(engine.main_address, fl.NetAddr), (desc, fl.MrDesc)]:
        raw = bytes(value)
        for cut in (1, len(raw) // 2, len(raw) - 1):
            with pytest.raises(fl.MalformedError):
                cls.from_bytes(raw[:cut])
        with pytest.raises(fl.MalformedError):
            cls.from_bytes(raw + b"\0")


def test_malformed_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        fl.MrDesc.parse("nope")


def test_non_bytes_input_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        fl.NetAddr.from_bytes(12)  # type: ignore[arg-type]
