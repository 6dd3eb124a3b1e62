"""The peer process for test_reads.py: it owns the memory the test READs."""

from __future__ import annotations

from typing import Any

from peers import expect, pattern


def read_source(conn: Any, provider: str, n: int, seed: int) -> None:
    """Registers two buffers of n bytes of pattern(n, seed): one with remote_read=True, one
    without. Sends both MrDescs, then on "check" reports whether both still hold their bytes
    (a READ must never change its source), and exits on "bye"."""
    import fabric_lib as fl

    with fl.Engine(provider) as engine:
        readable = pattern(n, seed)
        write_only = pattern(n, seed + 1)
        _, readable_desc = engine.reg_mr(readable, remote_read=True)
        _, write_only_desc = engine.reg_mr(write_only)
        conn.send((bytes(readable_desc), bytes(write_only_desc)))
        while (msg := expect(conn)) != "bye":
            assert msg == "check", msg
            conn.send(
                bool((readable == pattern(n, seed)).all())
                and bool((write_only == pattern(n, seed + 1)).all())
            )
