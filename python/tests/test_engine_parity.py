"""Python at par with C++ (docs/python.md, "C++ and Python side by side"): the calls beyond single
requests, and a check that the parity table names a Python counterpart for every public
TransferEngine call."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

import fabric_lib as fl

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_reg_mrs_registers_each_object_in_order_and_they_carry_writes() -> None:
    with fl.Engine("tcp") as tx, fl.Engine("tcp") as rx:
        dsts = [np.zeros(n, np.uint8) for n in (100, 4096, 70000)]
        srcs = [np.full(d.shape, i + 1, np.uint8) for i, d in enumerate(dsts)]
        remote = rx.reg_mrs(dsts)
        local = tx.reg_mrs(srcs)
        assert [desc.size for _, desc in remote] == [d.nbytes for d in dsts]
        for (src_h, _), (_, dst_d), src in zip(local, remote, srcs):
            tx.single_write(src_h, dst_d, src.nbytes).wait(60)
        for d, s in zip(dsts, srcs):
            assert np.array_equal(d, s)


def test_reg_mrs_is_all_or_nothing_and_names_the_bad_object() -> None:
    with fl.Engine("tcp") as engine:
        good = np.zeros(64, np.uint8)
        with pytest.raises((fl.FabricError, TypeError, ValueError)):
            engine.reg_mrs([good, b"read-only bytes"])
        # The good one did not stay registered: registering it again works and deregisters.
        (handle, _), = engine.reg_mrs([good])
        engine.dereg_mr(handle)


def test_fence_peer_on_tcp_and_its_refusal_on_shm() -> None:
    with fl.Engine("tcp") as a, fl.Engine("tcp") as b:
        a.fence_peer(b.main_address)
    with fl.Engine("shm") as a, fl.Engine("shm") as b:
        with pytest.raises(fl.UnsupportedError):
            a.fence_peer(b.main_address)


def test_progress_and_post_timings() -> None:
    with fl.Engine("tcp", record_post_timings=True) as tx, fl.Engine("tcp") as rx:
        src = np.arange(4096, dtype=np.uint8)
        dst = np.zeros_like(src)
        src_h, _ = tx.reg_mr(src)
        _, dst_d = rx.reg_mr(dst)
        t = tx.single_write(src_h, dst_d, src.nbytes)
        for _ in range(100000):
            if t.done():
                break
            assert isinstance(tx.progress(), bool)
        t.wait(60)
        timings = tx.take_post_timings()
        assert [d["kind"] for d in timings] == ["single_write"]
        stamp = timings[0]
        assert stamp["called"] <= stamp["enqueued"] <= stamp["first_post"] <= stamp["last_post"]
        assert tx.take_post_timings() == []
    with pytest.raises(fl.ShutdownError):
        tx.progress()


def test_groups_and_domain_nics_describe_what_opened() -> None:
    with fl.Engine("tcp") as engine:
        groups = engine.groups
        assert len(groups) == engine.num_groups
        assert groups[0]["cpus"] == engine.thread_cpus
        assert len(groups[0]["nics"]) == engine.num_domains
        assert engine.domain_nics == groups[0]["nics"]
        assert "127.0.0.1" in engine.domain_nics[0]


def _cpp_calls() -> set[str]:
    """Public member functions of TransferEngine, from its header."""
    text = (ROOT / "include/fabric/engine.hpp").read_text()
    body = text[text.index("class TransferEngine {") :]
    body = body[: body.index("\n private:")]
    names: set[str] = set()
    for line in body.splitlines():
        code = line.split("//", 1)[0]
        # Declared names only: not calls inside default arguments (Device::host()).
        names |= set(re.findall(r"(?<![:.\w])([a-z_][a-z0-9_]*)\(", code))
    return names - {"const", "noexcept", "operator", "sizeof", "explicit"}


def test_the_parity_table_names_a_python_counterpart_for_every_cpp_call() -> None:
    doc = (ROOT / "docs/python.md").read_text()
    table = doc[doc.index("## C++ and Python side by side") :]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([a-z_]+)\(?\)?` \| (.+?) \|", table, re.M)}
    missing = sorted(n for n in _cpp_calls() if n not in rows)
    assert missing == [], f"docs/python.md lacks rows for {missing}"
    for name, python in rows.items():
        assert python.strip() and python.strip() != "-", f"{name} has no Python counterpart"
