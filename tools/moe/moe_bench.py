#!/usr/bin/env python3
"""MoE dispatch/combine benchmark: fabric_lib.moe against torch.distributed all_to_all (gloo), on
the same processes and the same data.

Per EP size it spawns EP ranks (one process each, rendezvous through a TCPStore on 127.0.0.1),
runs --warmup + --iterations of dispatch and combine, and times each call on every rank between
gloo barriers. A call's latency is the slowest rank's (per iteration), reported as p50/p99.
It also reports the proxy timeline (app call -> first WRITE posted, routes in -> overflow posted,
posting time per peer), bytes on the wire against the minimum, and receive-buffer memory.

    PYTHONPATH=build/default/python /usr/bin/python3 tools/moe/moe_bench.py \
        --ep 2 4 8 --json moe-bench.json --plot moe-bench.png
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing as mp
import os
import socket
import sys
import time
import traceback

import numpy as np

CTX = mp.get_context("spawn")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, q):
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else 0.0


def make_data(args, rank, it):
    import torch

    rng = np.random.default_rng(7919 * it + rank)
    x = torch.from_numpy(rng.standard_normal((args.tokens, args.hidden), dtype=np.float32)).to(torch.bfloat16)
    topk = np.stack([rng.permutation(args.experts)[: args.top_k] for _ in range(args.tokens)]).astype(np.int64)
    w = rng.random((args.tokens, args.top_k), dtype=np.float32)
    return x, torch.from_numpy(topk), torch.from_numpy(w)


def gloo_dispatch_combine(dist, torch, x, topk, w, world, rank, experts):
    """The same exchange over gloo: counts, then tokens (once per destination rank), then expert
    rows back (once per (token, k)), then the weighted sum."""
    owner = (topk * world) // experts  # contiguous blocks of experts (E multiple of N here)
    t0 = time.perf_counter_ns()
    dests = [torch.nonzero((owner == d).any(dim=1)).flatten() for d in range(world)]
    send_counts = torch.tensor([len(ix) for ix in dests], dtype=torch.int64)
    recv_counts = torch.empty(world, dtype=torch.int64)
    dist.all_to_all_single(recv_counts, send_counts)
    send = torch.cat([x[ix] for ix in dests]).view(torch.uint8)
    recv = torch.empty((int(recv_counts.sum()), 2 * x.shape[1]), dtype=torch.uint8)
    dist.all_to_all_single(recv, send, recv_counts.tolist(), send_counts.tolist())
    t1 = time.perf_counter_ns()
    # Combine: each (token, k) row goes back (the expert output is the token itself here),
    # then the weighted sum in FP32, as fabric's combine does.
    pairs = [torch.nonzero(owner == d) for d in range(world)]  # (t, k) in token order per rank
    rows_back = [len(p) for p in pairs]
    pair_counts = torch.tensor(rows_back, dtype=torch.int64)
    recv_pairs = torch.empty(world, dtype=torch.int64)
    dist.all_to_all_single(recv_pairs, pair_counts)
    back = torch.empty((int(recv_pairs.sum()), 2 * x.shape[1]), dtype=torch.uint8)
    ours = torch.empty((sum(rows_back), 2 * x.shape[1]), dtype=torch.uint8)
    dist.all_to_all_single(ours, back, rows_back, recv_pairs.tolist())
    tk = torch.cat(pairs)
    out = torch.zeros(x.shape, dtype=torch.float32)
    out.index_add_(0, tk[:, 0], ours.view(torch.bfloat16).float() * w[tk[:, 0], tk[:, 1]].unsqueeze(1))
    t2 = time.perf_counter_ns()
    return (t1 - t0) / 1e3, (t2 - t1) / 1e3


def rank_main(args, rank, world, port, q, master="127.0.0.1", bind="127.0.0.1"):
    try:
        import torch
        import torch.distributed as dist

        from fabric_lib.moe import Buffer

        store = dist.TCPStore(master, port, world, rank == 0, timeout=datetime.timedelta(seconds=120))
        dist.init_process_group("gloo", store=dist.PrefixStore("gloo", store), rank=rank, world_size=world)
        buf = Buffer(rank, world, args.experts, args.hidden, args.tokens, args.top_k, store=store,
                     provider=args.provider, max_private_tokens=args.private, node_size=args.node_size,
                     record_post_timings=True, timeout_ms=60000, request_timeout_ms=60000,
                     busy_poll=args.busy_poll, bind_address=bind)
        res = {"dispatch_us": [], "combine_us": [], "gloo_dispatch_us": [], "gloo_combine_us": [],
               "first_write_us": [], "routes_to_overflow_us": [], "post_per_peer_us": [],
               "wire_bytes": [], "min_bytes": [], "combine_send_us": [], "combine_wait_us": [],
               "combine_sum_us": [], "dispatch_wait_us": []}
        first_expert = buf.layout["first_expert"]
        for it in range(args.warmup + args.iterations):
            x, topk, w = make_data(args, rank, it)
            owner = (topk * world) // args.experts
            before = buf.stats()
            buf.post_timings()  # drop older records
            dist.barrier()
            t0 = time.perf_counter_ns()
            recv_x, recv_count, handle = buf.dispatch(x, topk, w)
            t1 = time.perf_counter_ns()
            dist.barrier()
            t2 = time.perf_counter_ns()
            out = buf.combine(recv_x, handle)
            t3 = time.perf_counter_ns()
            tl = buf.timeline()
            timings = buf.post_timings()
            after = buf.stats()
            dist.barrier()
            gd, gc = gloo_dispatch_combine(dist, torch, x, topk, w, world, rank, args.experts)
            if it < args.warmup:
                continue
            res["dispatch_us"].append((t1 - t0) / 1e3)
            res["combine_us"].append((t3 - t2) / 1e3)
            res["gloo_dispatch_us"].append(gd)
            res["gloo_combine_us"].append(gc)
            res["first_write_us"].append((tl["private_posted"] - tl["begin_dispatch"]) / 1e3)
            res["routes_to_overflow_us"].append((tl["overflow_posted"] - tl["routes_in"]) / 1e3)
            res["dispatch_wait_us"].append((tl["tokens_in"] - tl["private_posted"]) / 1e3)
            # steady_clock and perf_counter share CLOCK_MONOTONIC on Linux.
            res["combine_send_us"].append((tl["combine_posted"] - t2) / 1e3)
            res["combine_wait_us"].append((tl["combine_in"] - tl["combine_posted"]) / 1e3)
            res["combine_sum_us"].append((t3 - tl["combine_in"]) / 1e3)
            scatters = [t for t in timings if t["kind"] == 4 and t["posts"] > 0]
            if scatters:
                s = scatters[0]  # the routes + private scatter
                res["post_per_peer_us"].append((s["last_post"] - s["called"]) / 1e3 / s["posts"])
            res["wire_bytes"].append(after["bytes_posted"] - before["bytes_posted"]
                                     + after["direct_bytes"] - before["direct_bytes"])
            remote_dest_tokens = sum(len(set(o.tolist()) - {rank}) for o in owner)
            remote_rows = int((owner != rank).sum())
            res["min_bytes"].append(remote_dest_tokens * args.hidden * 2 + remote_rows * args.hidden * 2)
        buf.quiesce()
        res["layout"] = buf.layout
        res["stats"] = buf.stats()
        q.put((rank, res))
        dist.barrier()
        buf.close()
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001
        q.put((rank, {"error": traceback.format_exc()}))


class FileQueue:
    """Where a rank launched inside a netbed host (another process tree) puts its result."""

    def __init__(self, path):
        self.path = path

    def put(self, item):
        with open(self.path, "w") as f:
            json.dump(item, f)


def run_ranks_local(args, world):
    port = free_port()
    q = CTX.Queue()
    procs = [CTX.Process(target=rank_main, args=(args, r, world, port, q)) for r in range(world)]
    for p in procs:
        p.start()
    results = {}
    try:
        for _ in range(world):
            rank, res = q.get(timeout=args.timeout)
            results[rank] = res
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    return results


def run_ranks_netbed(args, world):
    """One netbed host per rank (its own namespace and rate-limited NIC); tcp provider."""
    import subprocess
    import tempfile

    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    sys.path.insert(0, os.path.join(root, "tools", "netbed"))
    from testbed import Testbed

    name = f"moeb{os.getpid()}"
    results = {}
    with Testbed(name, hosts=world, nics=1, rate=args.netbed) as bed, tempfile.TemporaryDirectory() as tmp:
        master = bed.address(0, 0)
        port = 29500 + os.getpid() % 1000
        env_args = ["env", "-u", "FI_TCP_IFACE", "-u", "FI_SOCKETS_IFACE", "GLOO_SOCKET_IFNAME=nic0",
                    f"PYTHONPATH={os.environ.get('PYTHONPATH', '')}"]
        procs = []
        for r in range(world):
            cmd = env_args + [sys.executable, os.path.abspath(__file__), "--worker", str(r), "--world", str(world),
                              "--master", master, "--port", str(port), "--bind", bed.address(r, 0),
                              "--result", os.path.join(tmp, f"{r}.json")] + args.passthrough
            procs.append(bed.popen(r, cmd))
        for p in procs:
            p.wait(timeout=args.timeout)
        for r in range(world):
            with open(os.path.join(tmp, f"{r}.json")) as f:
                rank, res = json.load(f)
            results[rank] = res
    return results


def run_ep(args, world):
    results = run_ranks_netbed(args, world) if args.netbed else run_ranks_local(args, world)
    for rank, res in results.items():
        if "error" in res:
            raise RuntimeError(f"rank {rank} failed:\n{res['error']}")
    slowest = lambda key: [max(results[r][key][i] for r in results) for i in range(args.iterations)]  # noqa: E731
    allranks = lambda key: [v for r in results for v in results[r][key]]  # noqa: E731
    lay = results[0]["layout"]
    n, t, r, e = world, args.tokens, args.top_k, args.experts
    paper_bound = n * t * max(r, e // n) * args.hidden * 2
    row = {"ep": world, "hidden": args.hidden, "top_k": r, "tokens": t, "experts": e,
           "provider": args.provider, "iterations": args.iterations,
           "network": f"netbed, 1 NIC per rank at {args.netbed}" if args.netbed else "loopback (one host)"}
    res_transfer = {r: [a + b for a, b in zip(results[r]["combine_send_us"], results[r]["combine_wait_us"])]
                    for r in results}
    for r in results:
        results[r]["combine_transfer_us"] = res_transfer[r]
    for key in ["dispatch_us", "combine_us", "combine_transfer_us", "gloo_dispatch_us", "gloo_combine_us"]:
        v = slowest(key)
        row[key.replace("_us", "_p50_us")] = percentile(v, 50)
        row[key.replace("_us", "_p99_us")] = percentile(v, 99)
    for key in ["first_write_us", "routes_to_overflow_us", "post_per_peer_us", "dispatch_wait_us",
                "combine_send_us", "combine_wait_us", "combine_sum_us"]:
        row[key.replace("_us", "_p50_us")] = percentile(allranks(key), 50)
    wire = sum(allranks("wire_bytes"))
    minimum = sum(allranks("min_bytes"))
    row["wire_bytes_per_iteration"] = wire / args.iterations
    row["min_bytes_per_iteration"] = minimum / args.iterations
    row["wire_over_min"] = wire / minimum if minimum else 0.0
    row["arena_bytes_per_rank"] = lay["total_bytes"]
    row["paper_recv_bound_bytes"] = paper_bound
    row["arena_over_paper_bound"] = lay["total_bytes"] / paper_bound
    row["max_writes_per_peer_dispatch"] = max(results[x]["stats"]["max_writes_per_peer_dispatch"] for x in results)
    row["max_writes_per_peer_combine"] = max(results[x]["stats"]["max_writes_per_peer_combine"] for x in results)
    return row


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    eps = [r["ep"] for r in rows]
    xs = np.arange(len(eps))
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.2
    for i, (key, label) in enumerate([("dispatch_p50_us", "fabric dispatch"), ("gloo_dispatch_p50_us", "gloo dispatch"),
                                      ("combine_p50_us", "fabric combine"), ("gloo_combine_p50_us", "gloo combine")]):
        ax.bar(xs + (i - 1.5) * width, [r[key] for r in rows], width, label=label)
    ax.set_xticks(xs, [f"EP={e}" for e in eps])
    ax.set_ylabel("p50 latency (us), slowest rank")
    ax.set_title(f"MoE dispatch/combine, hidden {rows[0]['hidden']}, top-{rows[0]['top_k']}, "
                 f"{rows[0]['tokens']} tokens/rank\n{rows[0]['provider']}, {rows[0]['network']}", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ep", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--top-k", type=int, default=8)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--experts", type=int, default=256, help="total experts (DeepSeek-V3: 256)")
    p.add_argument("--private", type=int, default=16)
    p.add_argument("--node-size", type=int, default=1)
    p.add_argument("--provider", default="shm")
    p.add_argument("--busy-poll", action="store_true")
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--json", default="moe-bench.json")
    p.add_argument("--plot", default="moe-bench.png")
    p.add_argument("--netbed", default="", help="run each rank in its own netbed host, NIC rate e.g. 10gbit "
                   "(tcp provider; needs root, docs/netbed.md)")
    # Internal: one rank inside a netbed host.
    p.add_argument("--worker", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--world", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--master", default="", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--bind", default="", help=argparse.SUPPRESS)
    p.add_argument("--result", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    shared = ["--hidden", "--top-k", "--tokens", "--experts", "--private", "--node-size", "--provider",
              "--iterations", "--warmup"]
    args.passthrough = []
    for flag in shared:
        args.passthrough += [flag, str(getattr(args, flag[2:].replace("-", "_")))]
    if args.busy_poll:
        args.passthrough.append("--busy-poll")
    if args.worker >= 0:
        rank_main(args, args.worker, args.world, args.port, FileQueue(args.result), args.master, args.bind)
        return 0
    if args.netbed and args.provider == "shm":
        args.provider = "tcp"
        args.passthrough[args.passthrough.index("--provider") + 1] = "tcp"
    os.environ.setdefault("FI_TCP_IFACE", "lo")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    rows = []
    for ep in args.ep:
        row = run_ep(args, ep)
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(args.json, "w") as f:
        json.dump({"command": " ".join(sys.argv), "rows": rows}, f, indent=1)
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
