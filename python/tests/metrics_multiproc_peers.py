"""The writer process of test_metrics_multiprocess.py: it runs with PROMETHEUS_MULTIPROC_DIR
set, so prometheus_client starts in its multi-process mode, and it never serves /metrics."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from peers import expect


def writer_role(conn: Any, provider: str, name: str, sizes: list[int]) -> None:
    import fabric_lib as fl
    import fabric_lib.metrics as fm

    with fl.Engine(provider) as tx, fl.Engine(provider) as rx:
        src = np.ones(max(sizes), np.uint8)
        dst = np.zeros_like(src)
        src_h, _ = tx.reg_mr(src)
        _, dst_d = rx.reg_mr(dst)
        fm.register(tx, name)
        for n in sizes:
            tx.single_write(src_h, dst_d, n).wait(60)
        conn.send(("sent", os.getpid()))
        # Engines held until the test has seen the periodic copy; then a second round, which only
        # an explicit copy (before the engines stop) carries to the files.
        assert expect(conn) == "again"
        for n in sizes:
            tx.single_write(src_h, dst_d, n).wait(60)
        assert fm.write_multiprocess_files()
    conn.send("stopped")
