#!/usr/bin/env python3
"""NIXL's UCX backend on loopback (run with UCX_TLS=tcp UCX_NET_DEVICES=lo): the
single-write and paged-write patterns of fabric-bench, two agents in one process, for the
"Peers side by side" note in docs/benchmarks.md. Not run by the build or the tests.

Needs `pip install nixl nixl-cu12 numpy`; no GPU is used. Every wait is bounded.
"""
import time, sys, numpy as np
from nixl._api import nixl_agent, nixl_agent_config
cfg = nixl_agent_config(backends=["UCX"])
A = nixl_agent("A", cfg); B = nixl_agent("B", cfg)
SZ = 64 << 20
src = np.ones(SZ, dtype=np.uint8); dst = np.zeros(SZ, dtype=np.uint8)
A.register_memory([(src.ctypes.data, SZ, 0, "")], "DRAM"); B.register_memory([(dst.ctypes.data, SZ, 0, "")], "DRAM")
A.add_remote_agent(B.get_agent_metadata())
def run(srcl, dstl, n):
    ld = A.get_xfer_descs(srcl, "DRAM"); rd = B.get_xfer_descs(dstl, "DRAM")
    h = A.initialize_xfer("WRITE", ld, rd, "B", b"")
    t = time.perf_counter()
    for _ in range(n):
        assert A.transfer(h) in ("PROC", "DONE")
        dl = time.time() + 30
        while True:
            s = A.check_xfer_state(h)
            if s == "DONE": break
            assert s != "ERR" and time.time() < dl, s
    dt = time.perf_counter() - t
    A.release_xfer_handle(h)
    return dt
sp, dp = src.ctypes.data, dst.ctypes.data
for size in (4096, 65536, 1 << 20, 16 << 20):
    n = max(8, min(2000, (256 << 20) // size))
    run([(sp, size, 0)], [(dp, size, 0)], 2)
    dt = run([(sp, size, 0)], [(dp, size, 0)], n)
    print("single_write %9d  %.2f Gbit/s" % (size, n * size * 8 / dt / 1e9))
for page in (4096, 16384):
    s = [(sp + i * page, page, 0) for i in range(1024)]
    d = [(dp + ((i * 7919) % 1024) * page, page, 0) for i in range(1024)]
    run(s, d, 2); n = 8
    dt = run(s, d, n)
    print("paged_write %6d x1024  %.2f Gbit/s" % (page, n * 1024 * page * 8 / dt / 1e9))
print("verify", bool((dst[:1 << 20] == 1).all()))
