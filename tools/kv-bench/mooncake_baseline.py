#!/usr/bin/env python3
"""The bulk KV move of fabric-kv-bench through Mooncake's transfer engine, for docs/kv.md.

Same request shape as `fabric-kv-bench --tokens T` (94 layers x K|V x pages of 32 KiB, every
page its own WRITE, as the Mooncake connector moves a vLLM request after prefill), between two
processes on this host over Mooncake's tcp transport on 127.0.0.1 (P2P handshake, no metadata
server). Not part of CI: it needs the PyPI wheel `mooncake-transfer-engine` (and, on a host
without a GPU, libcudart.so.12 from `nvidia-cuda-runtime-cu12` and the CUDA toolkit's stub
libcuda.so.1 on LD_LIBRARY_PATH; the wheel links both). See docs/kv.md for the exact commands.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import multiprocessing as mp
import statistics
import time

LAYERS = 94
PARTS = 2  # K and V
PAGE_BYTES = 32 * 1024
TOKENS_PER_PAGE = 64


def _engine(port_hint: str):
    from mooncake.engine import TransferEngine

    engine = TransferEngine()
    # local_hostname, metadata server ("P2PHANDSHAKE": peers exchange it directly), protocol,
    # device list (none for tcp).
    rc = engine.initialize(port_hint, "P2PHANDSHAKE", "tcp", "")
    if rc != 0:
        raise RuntimeError(f"mooncake initialize failed: {rc}")
    return engine


def _decoder(nbytes: int, conn) -> None:
    engine = _engine("127.0.0.1")
    buf = ctypes.create_string_buffer(nbytes)
    addr = ctypes.addressof(buf)
    if engine.register_memory(addr, nbytes) != 0:
        raise RuntimeError("mooncake register_memory failed on the decoder")
    conn.send((f"127.0.0.1:{engine.get_rpc_port()}", addr))
    # Every page's first byte carries its index mod 251: a check that the bytes really came.
    conn.recv()  # "check"
    pages = nbytes // PAGE_BYTES
    raw = buf.raw  # one copy; every .raw access copies the whole buffer
    bad = sum(1 for p in range(pages) if raw[p * PAGE_BYTES] != (p % 251))
    conn.send(bad)
    conn.recv()  # "bye"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=128,
                    help="pages per batch_transfer_sync_write (its tcp lane queue refuses 3,008)")
    ap.add_argument("--json", default="mooncake-baseline.json")
    args = ap.parse_args()
    pages_per_part = (args.tokens + TOKENS_PER_PAGE - 1) // TOKENS_PER_PAGE
    pages = LAYERS * PARTS * pages_per_part
    nbytes = pages * PAGE_BYTES

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_decoder, args=(nbytes, child), daemon=True)
    proc.start()
    try:
        if not parent.poll(60):
            raise RuntimeError("the decoder did not start within 60 s")
        target, remote = parent.recv()
        engine = _engine("127.0.0.1")
        src = ctypes.create_string_buffer(nbytes)
        for p in range(pages):
            src[p * PAGE_BYTES] = bytes([p % 251])
        local = ctypes.addressof(src)
        if engine.register_memory(local, nbytes) != 0:
            raise RuntimeError("mooncake register_memory failed on the prefiller")
        offsets = [p * PAGE_BYTES for p in range(pages)]
        times_ms = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            for b in range(0, pages, args.batch):
                chunk = offsets[b:b + args.batch]
                rc = engine.batch_transfer_sync_write(
                    target, [local + o for o in chunk], [remote + o for o in chunk],
                    [PAGE_BYTES] * len(chunk))
                if rc != 0:
                    raise RuntimeError(f"mooncake batch_transfer_sync_write failed: {rc}")
            times_ms.append((time.perf_counter() - t0) * 1e3)
        parent.send("check")
        if not parent.poll(60):
            raise RuntimeError("the decoder did not answer the check within 60 s")
        bad = parent.recv()
        parent.send("bye")
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
    median = statistics.median(times_ms)
    out = {
        "engine": "mooncake-transfer-engine (tcp, 127.0.0.1)",
        "tokens": args.tokens,
        "pages": pages,
        "bytes": nbytes,
        "bulk_transfer_ms": times_ms,
        "bulk_transfer_ms_median": median,
        "gbit_per_s": nbytes * 8 / (median / 1e3) / 1e9,
        "pages_per_batch": args.batch,
        "pages_wrong": bad,
    }
    with open(args.json, "w") as f:
        json.dump(out, f, indent=2)
    print(f"mooncake tcp: {pages} pages of {PAGE_BYTES} B ({nbytes / 2**20:.1f} MiB): "
          f"bulk {median:.1f} ms median of {args.repeat} ({out['gbit_per_s']:.2f} Gbit/s), "
          f"{bad} pages wrong")
    if bad:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
