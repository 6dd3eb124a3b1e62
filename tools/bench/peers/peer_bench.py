#!/usr/bin/env python3
"""The single-write and paged-write patterns of fabric-bench through another transfer engine,
for `fabric-bench --peer NAME` (docs/benchmarks.md, "Peers side by side").

    peer_bench.py --peer mooncake|nixl --transport tcp|shm --single-sizes 4096,65536
                  --page-sizes 4096,16384 --pages 1024 --window 64 --reps 3 [--quick]

Both engines run in a network namespace of their own that has only lo (the peers' sockets
listen on every interface). The target engine runs in a second process (spawned, so neither
engine is forked). The
initiator writes what fabric-bench writes: `window` single writes of the same size and offsets
in flight per batch, or batches of `pages` pages scattered to a permuted page order (page i lands
on page (i * 7919) mod pages). After each measured size the target hashes its region and the
initiator compares it with the bytes it expected. Every wait is bounded.

Prints one JSON object on its last line of stdout: {"peer", "transport", "version",
"results": [{"op", "size", "count", "iterations", "gbps", "verified"}]}; when the peer cannot
run here, {"peer", "error"} and exit status 3. Needs the peer's wheel in the interpreter that
runs this (a venv is fine): mooncake-transfer-engine-non-cuda, or nixl + nixl-cu12 + numpy.
"""
import argparse
import ctypes
import hashlib
import importlib.metadata
import json
import multiprocessing as mp
import os
import sys
import time

KSTRIDE = 7919
WAIT_S = 120


def dst_page_order(pages):
    # Same permutation as fabric-bench's dst_page_order (tools/bench/engine_runs.cpp).
    if pages % KSTRIDE != 0:
        return [(i * KSTRIDE) % pages for i in range(pages)]
    return [pages - 1 - i for i in range(pages)]


def iterations_for(bytes_per_op, quick):
    # Same budget rule as fabric-bench (tools/bench/sweep.cpp).
    budget = (16 << 20) if quick else (1 << 30)
    return max(4 if quick else 16, min(budget // bytes_per_op, 20000))


def digest(addr, length):
    return hashlib.blake2b(ctypes.string_at(addr, length), digest_size=16).hexdigest()


def private_network():
    """Moves this process (and the target it spawns) into a network namespace of its own,
    holding only a loopback interface, and brings that up. Mooncake's TCP transport listens on
    every interface; inside the namespace there is no interface but lo to listen on.
    Returns None on success, else why not."""
    import fcntl
    import socket
    import struct
    libc = ctypes.CDLL(None, use_errno=True)
    clone_newnet, clone_newuser = 0x40000000, 0x10000000
    if libc.unshare(clone_newnet) != 0 and libc.unshare(clone_newuser | clone_newnet) != 0:
        return "unshare(CLONE_NEWNET): %s" % os.strerror(ctypes.get_errno())
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(s, siocgifflags, req))[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH14s", b"lo", flags | iff_up, b""))
    return None


def package_version(*names):
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


# --- Mooncake Transfer Engine: its TCP transport, P2P handshake (no metadata server) ---

class Mooncake:
    name = "mooncake"

    @staticmethod
    def check_transport(transport):
        if transport != "tcp":
            raise RuntimeError("Mooncake's wheel offers no shared-memory transport here; "
                               "its only non-RDMA transport is tcp")

    @staticmethod
    def version():
        return package_version("mooncake-transfer-engine-non-cuda", "mooncake-transfer-engine")

    def __init__(self, region):
        from mooncake.engine import TransferEngine
        self.engine = TransferEngine()
        rc = self.engine.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "")
        if rc != 0:
            raise RuntimeError("TransferEngine.initialize returned %d" % rc)
        self.addr = self.engine.allocate_managed_buffer(region)
        if not self.addr:
            raise RuntimeError("allocate_managed_buffer(%d) failed" % region)

    def target_info(self):
        return {"segment": "127.0.0.1:%d" % self.engine.get_rpc_port(), "addr": self.addr}

    def connect(self, info):
        self.segment = info["segment"]
        self.remote = info["addr"]

    def prepare(self, srcs, dsts, lengths):
        return (srcs, [self.remote + d for d in dsts], lengths)

    def run_batch(self, batch):
        rc = self.engine.batch_transfer_sync_write(self.segment, *batch)
        if rc != 0:
            raise RuntimeError("batch_transfer_sync_write returned %d" % rc)

    def release(self, batch):
        pass


# --- NIXL: its UCX backend (UCX_TLS chosen from --transport, loopback only) ---

class Nixl:
    name = "nixl"

    @staticmethod
    def check_transport(transport):
        # UCX reads these when the agent creates its backend. NIXL asks UCX for peer-failure
        # handling, which UCX's shared-memory transports lack; cma (process_vm_writev) moves
        # the bytes there and tcp on loopback carries UCX's own active messages.
        os.environ["UCX_TLS"] = "tcp" if transport == "tcp" else "cma,tcp"
        os.environ["UCX_NET_DEVICES"] = "lo"

    @staticmethod
    def version():
        return package_version("nixl-cu12", "nixl-cu13", "nixl")

    def __init__(self, region, agent_name):
        import numpy as np
        from nixl._api import nixl_agent, nixl_agent_config
        self.agent = nixl_agent(agent_name, nixl_agent_config(backends=["UCX"]))
        self.array = np.zeros(region, dtype=np.uint8)
        self.addr = self.array.ctypes.data
        self.agent.register_memory([(self.addr, region, 0, "")], "DRAM")

    def target_info(self):
        return {"metadata": self.agent.get_agent_metadata(), "addr": self.addr}

    def connect(self, info):
        self.remote_name = self.agent.add_remote_agent(info["metadata"])
        if isinstance(self.remote_name, bytes):
            self.remote_name = self.remote_name.decode()
        self.remote = info["addr"]

    def prepare(self, srcs, dsts, lengths):
        local = self.agent.get_xfer_descs([(s, n, 0) for s, n in zip(srcs, lengths)], "DRAM")
        remote = self.agent.get_xfer_descs(
            [(self.remote + d, n, 0) for d, n in zip(dsts, lengths)], "DRAM")
        return self.agent.initialize_xfer("WRITE", local, remote, self.remote_name, b"")

    def run_batch(self, handle):
        state = self.agent.transfer(handle)
        if state not in ("PROC", "DONE"):
            raise RuntimeError("transfer: %s" % state)
        deadline = time.monotonic() + WAIT_S
        while state != "DONE":
            state = self.agent.check_xfer_state(handle)
            if state == "ERR":
                raise RuntimeError("check_xfer_state: ERR")
            if time.monotonic() > deadline:
                raise RuntimeError("a NIXL transfer did not finish in %d s" % WAIT_S)

    def release(self, handle):
        self.agent.release_xfer_handle(handle)


PEERS = {"mooncake": Mooncake, "nixl": Nixl}


def make(peer, region, role):
    return Mooncake(region) if peer == "mooncake" else Nixl(region, role)


def target_main(peer, transport, region, conn):
    try:
        PEERS[peer].check_transport(transport)
        engine = make(peer, region, "fabric-bench-target")
        conn.send(("ready", engine.target_info()))
    except Exception as e:  # reported by the initiator, which exits 3
        conn.send(("error", "%s: %s" % (type(e).__name__, e)))
        return
    while conn.poll(WAIT_S * 5):
        cmd = conn.recv()
        if cmd[0] == "zero":
            ctypes.memset(engine.addr, 0, region)
            conn.send("ok")
        elif cmd[0] == "hash":
            conn.send(digest(engine.addr + cmd[1], cmd[2]))
        else:
            break


def measure(engine, batch, rounds):
    engine.run_batch(batch)  # warm-up: connection set-up and first touch
    start = time.perf_counter()
    for _ in range(rounds):
        engine.run_batch(batch)
    return time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peer", choices=sorted(PEERS), required=True)
    ap.add_argument("--transport", choices=["tcp", "shm"], default="tcp")
    ap.add_argument("--single-sizes", default="")
    ap.add_argument("--page-sizes", default="")
    ap.add_argument("--pages", type=int, default=1024)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    singles = [int(s) for s in args.single_sizes.split(",") if s]
    page_sizes = [int(s) for s in args.page_sizes.split(",") if s]
    region = max([1 << 20] + singles + [p * args.pages for p in page_sizes])
    out = {"peer": args.peer, "transport": args.transport}

    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    target = ctx.Process(target=target_main, args=(args.peer, args.transport, region, there),
                         daemon=True)
    try:
        why = private_network()
        if why is not None:
            raise RuntimeError("cannot make a private network namespace (%s); not running a "
                               "peer whose sockets would listen beyond loopback" % why)
        out["network"] = "private namespace, lo only"
        PEERS[args.peer].check_transport(args.transport)
        out["version"] = PEERS[args.peer].version()
        engine = make(args.peer, region, "fabric-bench-initiator")
        target.start()
        if not here.poll(WAIT_S):
            raise RuntimeError("the target process did not start within %d s" % WAIT_S)
        status, info = here.recv()
        if status != "ready":
            raise RuntimeError("target: " + info)
        engine.connect(info)
    except Exception as e:
        out["error"] = "%s: %s" % (type(e).__name__, e)
        print(json.dumps(out))
        return 3

    def call(*cmd):
        here.send(cmd)
        if not here.poll(WAIT_S):
            raise RuntimeError("the target process stopped answering")
        return here.recv()

    src = os.urandom(region)
    ctypes.memmove(engine.addr, src, region)
    results = []
    plans = [("single_write", s, 1) for s in singles] + \
            [("paged_write", p, args.pages) for p in page_sizes]
    try:
        for op, size, count in plans:
            if op == "single_write":
                per_batch = max(1, args.window)
                srcs, dsts, lengths = [engine.addr] * per_batch, [0] * per_batch, [size] * per_batch
                expected = src[:size]
            else:
                order = dst_page_order(count)
                srcs = [engine.addr + i * size for i in range(count)]
                dsts = [order[i] * size for i in range(count)]
                lengths = [size] * count
                placed = bytearray(count * size)
                for i in range(count):
                    placed[order[i] * size:(order[i] + 1) * size] = src[i * size:(i + 1) * size]
                expected = bytes(placed)
            ops = iterations_for(size * count, args.quick)
            rounds = max(1, -(-ops // len(srcs)) if op == "single_write" else ops)
            call("zero")
            batch = engine.prepare(srcs, dsts, lengths)
            best = 0.0
            for _ in range(max(1, args.reps)):
                seconds = measure(engine, batch, rounds)
                best = max(best, rounds * len(srcs) * size * 8 / seconds / 1e9)
            engine.release(batch)
            want = hashlib.blake2b(expected, digest_size=16).hexdigest()
            verified = call("hash", 0, len(expected)) == want
            results.append({"op": op, "size": size, "count": count,
                            "iterations": rounds * len(srcs) if op == "single_write" else rounds,
                            "gbps": best, "verified": verified})
            print("%s %s %d x%d: %.2f Gbit/s%s" % (args.peer, op, size, count, best,
                  "" if verified else " (destination bytes differ)"), file=sys.stderr)
            if not verified:
                raise RuntimeError("%s %d B: destination bytes differ" % (op, size))
    except Exception as e:
        out["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        try:
            here.send(("bye",))
        except OSError:
            pass
        target.join(30)
        if target.is_alive():
            target.kill()
    out["results"] = results
    print(json.dumps(out))
    return 3 if "error" in out else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # NIXL 1.5's UCX plugin crashes in its global destructors at interpreter exit (SIGSEGV after
    # the report was printed); the report is out and the target has exited, so skip the teardown.
    os._exit(code)
