#!/usr/bin/env python3
"""Mooncake Transfer Engine over its TCP transport on loopback: the single-write and
paged-write patterns of fabric-bench, one transfer (or batch) at a time, for the
"Peers side by side" note in docs/benchmarks.md. Not run by the build or the tests.

Needs `pip install mooncake-transfer-engine-non-cuda` (a venv is fine). Every wait is bounded.
"""
import multiprocessing as mp, time, sys
from mooncake.engine import TransferEngine
SZ = 64 << 20
def target(q, done):
    e = TransferEngine()
    rc = e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "")
    buf = e.allocate_managed_buffer(SZ)
    q.put((rc, e.get_rpc_port(), buf))
    done.wait(120)
def main():
    q = mp.Queue(); done = mp.Event()
    p = mp.Process(target=target, args=(q, done)); p.start()
    rc, port, raddr = q.get(timeout=60)
    print("target init rc", rc, "port", port)
    e = TransferEngine()
    print("init rc", e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", ""))
    src = e.allocate_managed_buffer(SZ)
    peer = "127.0.0.1:%d" % port
    for size in (4096, 65536, 1 << 20, 16 << 20):
        n = max(8, min(2000, (256 << 20) // size))
        e.transfer_sync_write(peer, src, raddr, size)
        t = time.perf_counter()
        for _ in range(n):
            r = e.transfer_sync_write(peer, src, raddr, size)
            assert r == 0, r
        dt = time.perf_counter() - t
        print("single_write %9d  %.2f Gbit/s" % (size, n * size * 8 / dt / 1e9))
    for page in (4096, 16384):
        srcs = [src + i * page for i in range(1024)]
        dsts = [raddr + ((i * 7919) % 1024) * page for i in range(1024)]
        lens = [page] * 1024
        e.batch_transfer_sync_write(peer, srcs, dsts, lens)
        t = time.perf_counter(); n = 8
        for _ in range(n):
            r = e.batch_transfer_sync_write(peer, srcs, dsts, lens); assert r == 0, r
        dt = time.perf_counter() - t
        print("paged_write %6d x1024  %.2f Gbit/s" % (page, n * 1024 * page * 8 / dt / 1e9))
    done.set(); p.join(30)
if __name__ == "__main__":
    main()
