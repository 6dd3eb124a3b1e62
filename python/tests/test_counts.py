"""The imm-count helpers agree with the engine, here with K = 2 Domains."""

from __future__ import annotations

import numpy as np
import pytest

import fabric_lib as fl
from engine_pair import STEP_S, shm_pair

N = 1 << 16
K = 2


@pytest.fixture(scope="module")
def pair():
    with shm_pair(N, K) as p:
        yield p


def test_the_documented_table() -> None:
    assert fl.single_write_imm_count(4096, 1) == 1
    assert fl.single_write_imm_count(1, 2) == 2  # an empty piece still carries the imm
    assert fl.single_write_imm_count(10, 4, num_shards=3) == 3
    assert fl.single_write_imm_count(3 * fl.MAX_WRITE_BYTES, 2, domain=1) == 3
    assert fl.single_write_imm_count(3 * fl.MAX_WRITE_BYTES + 2, 2) == 4
    assert fl.paged_writes_imm_count(17) == 17
    assert fl.scatter_imm_count(100, 4) == 1
    assert fl.scatter_imm_count(100, 4, "bytes") == 4
    assert fl.scatter_imm_count(0, 4, 2) == 1


@pytest.mark.parametrize(
    "imm,length,kwargs",
    [
        (101, N, {}),
        (102, 1, {}),
        (103, N, {"num_shards": 3}),
        (104, N, {"domain": 1}),
        (105, 0, {}),
    ],
)
def test_single_write_counts(pair, imm: int, length: int, kwargs: dict) -> None:
    a, b, hs, dd, dst = pair
    expected = fl.single_write_imm_count(length, K, **kwargs)
    counter = b.imm_counter(imm)
    try:
        a.single_write(hs, dd, length, imm=imm, **kwargs).wait(STEP_S)
        counter.wait(expected, timeout=STEP_S)
        assert counter.value == expected
        assert (dst[:length] == np.arange(N, dtype=np.uint8)[:length]).all()
    finally:
        b.release_imm_counter(imm)


def test_paged_and_scatter_counts(pair) -> None:
    a, b, hs, dd, _ = pair
    counter = b.imm_counter(7)
    a.paged_writes(hs, dd, 1024, list(range(5)), [4, 3, 2, 1, 0], imm=7).wait(STEP_S)
    counter.wait_and_consume(fl.paged_writes_imm_count(5), timeout=STEP_S)
    a.scatter(hs, [(dd, 4096)], imm=7, routing="bytes").wait(STEP_S)
    counter.wait_and_consume(fl.scatter_imm_count(4096, K, "bytes"), timeout=STEP_S)
    a.scatter(hs, [(dd, 4096)], imm=7, routing=1).wait(STEP_S)
    counter.wait_and_consume(fl.scatter_imm_count(4096, K, 1), timeout=STEP_S)
    a.imm(7, dd).wait(STEP_S)
    counter.wait_and_consume(1, timeout=STEP_S)
    assert counter.value == 0
    b.release_imm_counter(7)
