"""fabric_lib.vllm._source: how the vLLM consumer finds its producer (no vLLM needed). A missing
or stale address fails the request with SourceUnavailable (a FabricError) and never crashes; a
restarted producer's new address is used at once; a block_size mismatch says so."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import fabric_lib as fl
import fabric_lib.kv as fkv
from fabric_lib.vllm._source import ProducerSource, SourceUnavailable

LOG = logging.getLogger("test_vllm_source")


def layout(block_tokens: int = 16) -> fkv.Layout:
    # The connector's layout: one block of one head is the "token", block_size folded in.
    return fkv.vllm_cpu(1, 4, 1, 2, 0, 2, block_tokens, 4)


def caches(block_tokens: int = 16) -> list[np.ndarray]:
    return [np.zeros((4, 2, 1, 2 * block_tokens), dtype=np.float32)]


@pytest.fixture
def receiver():
    r = fkv.Receiver(layout(), caches(), request_timeout_ms=1000, heartbeat_ms=200)
    yield r
    r.close()


def write(path, sender: fkv.Sender) -> None:
    path.write_text(sender.address.hex())


def test_address_file_missing_then_written_then_restarted(tmp_path, receiver):
    file = tmp_path / "producer.addr"
    source = ProducerSource(receiver, str(file), 2.0, LOG)
    with pytest.raises(SourceUnavailable, match="no producer address"):
        source.get()
    assert issubclass(SourceUnavailable, fl.FabricError)
    first = fkv.Sender(layout(), caches())
    try:
        write(file, first)
        index = source.get()
        assert source.get() == index  # cached
    finally:
        first.close()
    # The producer restarts: a new engine, a new address in the same file.
    second = fkv.Sender(layout(), caches())
    try:
        write(file, second)
        assert source.get() != index
    finally:
        second.close()


def test_stale_address_fails_and_is_not_retried_slowly(tmp_path, receiver):
    file = tmp_path / "producer.addr"
    gone = fkv.Sender(layout(), caches())
    write(file, gone)
    gone.close()
    source = ProducerSource(receiver, str(file), 1.0, LOG)
    with pytest.raises(SourceUnavailable):
        source.get()
    source.forget()
    with pytest.raises(SourceUnavailable, match="failed before"):
        source.get()  # known dead: at once, not another connect timeout
    file.write_text("not hex")
    with pytest.raises(SourceUnavailable, match="unreadable"):
        source.get()


def test_block_size_mismatch_is_named(receiver):
    other = fkv.Sender(layout(block_tokens=32), caches(block_tokens=32))
    try:
        source = ProducerSource(receiver, None, 5.0, LOG)
        with pytest.raises(SourceUnavailable, match="block_size"):
            source.get(other.address)
        with pytest.raises(SourceUnavailable, match="no address_file"):
            source.get()
    finally:
        other.close()
