#!/usr/bin/env python3
"""The weight update on the netbed (docs/netbed.md): T trainer and R inference processes, one
per emulated host with one tbf-limited NIC, over tcp. Runs the P2P update (planner + executor)
and the rank-0 baseline (gather -> send -> scatter over torch.distributed gloo) on the same
processes and data, checks that both leave the same bytes, and compares the measured times with
the simulator's prediction and the bound. Writes JSON (docs/weights.md, "Netbed validation").

  sudo python3 tools/weights/netbed_run.py --trainers 4 --inference 2 --rate 100mbit --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools/netbed"))
# The built package: PYTHONPATH when set (ctest sets it), else the default preset's build.
PACKAGE = os.environ.get("FABRIC_PYTHON_PACKAGE") or str(REPO / "build/default/python")
sys.path.insert(0, PACKAGE)

PORT = 29555


def layouts(trainers: int, inference: int, hidden: int, experts: int):
    from fabric_lib.weights import (InferenceLayout, MeshGroup, NameRule, Replicate, Shard, SourceParam,
                                    TargetParam, TrainerLayout)

    h = hidden
    # FSDP-sharded dense and EP-sharded experts, sent from the trainers' own shards (no unshard
    # traffic on the NICs: every chunk the planner cuts lies in one trainer's shard).
    tr = TrainerLayout([("dp", trainers)], [MeshGroup("dense", []), MeshGroup("experts", [])], [
        SourceParam("q", [2 * h, h], "bfloat16", [Shard(0)], "dense"),
        SourceParam("k", [h, h], "bfloat16", [Shard(0)], "dense"),
        SourceParam("v", [h, h], "bfloat16", [Shard(0)], "dense"),
        SourceParam("o", [h, 2 * h], "bfloat16", [Shard(0)], "dense"),
        SourceParam("gate", [3 * h, h], "bfloat16", [Shard(0)], "dense"),
        SourceParam("up", [3 * h, h], "bfloat16", [Shard(0)], "dense"),
        SourceParam("norm", [h], "float32", [Shard(0)], "dense"),
        SourceParam("head_t", [h, 8 * h], "bfloat16", [Shard(1)], "dense"),
        SourceParam("w1", [experts, h, h], "bfloat16", [Shard(0)], "experts"),
        SourceParam("w3", [experts, h, h], "bfloat16", [Shard(0)], "experts"),
        SourceParam("w2", [experts, h, h], "bfloat16", [Shard(0)], "experts"),
    ])
    inf = InferenceLayout([("tp", inference)], [
        TargetParam("qkv", [4 * h, h], "float8_e4m3fn", [Shard(0)], "block128"),
        TargetParam("o_proj", [h, 2 * h], "float8_e4m3fn", [Shard(1)], "per_channel"),
        TargetParam("gate_up", [6 * h, h], "bfloat16", [Shard(0)]),
        TargetParam("norm", [h], "bfloat16", [Replicate()]),
        TargetParam("lm_head", [8 * h, h], "bfloat16", [Shard(0)]),
        TargetParam("w13", [experts, 2 * h, h], "float8_e4m3fn", [Shard(0)], "block128"),
        TargetParam("w2", [experts, h, h], "float8_e4m3fn", [Shard(0)], "per_channel"),
    ])
    rules = [NameRule("qkv", ["q", "k", "v"]), NameRule("o_proj", ["o"]), NameRule("gate_up", ["gate", "up"]),
             NameRule("norm", ["norm"]), NameRule("lm_head", ["head_t"], transpose=True),
             NameRule("w13", ["w1", "w3"], fuse_dim=1), NameRule("w2", ["w2"])]
    return tr, inf, rules


def local_shards(tr, rank: int, version: int):
    import numpy as np

    from fabric_lib.weights import local_box, mesh_coords

    out = {}
    for p in tr.params:
        box = local_box(p.shape, p.placements, tr.mesh, mesh_coords(tr.mesh, rank))
        shape = [h - l for l, h in zip(*box)]
        rng = np.random.default_rng([version, rank, len(p.name), sum(map(ord, p.name))])
        x = rng.standard_normal(shape, dtype=np.float32)
        out[p.name] = (x.view(np.uint32) >> 16).astype(np.uint16) if p.dtype == "bfloat16" else x
    return out


def proc(args) -> None:
    from datetime import timedelta

    import numpy as np
    import torch
    import torch.distributed as dist

    import fabric_lib as fl
    from fabric_lib.weights import Receiver, Schedule, Trainer, local_box, mesh_coords, reserve_update_imms
    from fabric_lib import _weights as native

    T, R = args.trainers, args.inference
    world = T + R
    rank = args.rank
    tr, inf, rules = layouts(T, R, args.hidden, args.experts)
    sched = Schedule(Path(args.dir, "schedule.json").read_text())
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{PORT}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=300))
    engine = fl.Engine("tcp", bind_address=args.address, request_timeout_ms=60000)
    is_trainer = rank < T
    if is_trainer:
        word = np.zeros(64, np.uint8)
        _, desc = engine.reg_mr(word)
        imms = reserve_update_imms(engine)  # where this trainer counts barriers
        block = (imms.first, imms.count)
    else:
        rx = Receiver(engine, sched, rank - T)
        desc, block = rx.desc, rx.imm_block
    descs = [None] * world
    dist.all_gather_object(descs, (bytes(desc), block))
    arenas = [fl.MrDesc.from_bytes(d) for d, _ in descs[T:]]
    barriers = [fl.MrDesc.from_bytes(d) for d, _ in descs[:T]]
    result = {"rank": rank, "p2p": [], "baseline": []}
    trainer = Trainer(engine, sched, tr, rank, arenas, barriers, inference_imms=[b for _, b in descs[T:]],
                      trainer_imms=[b for _, b in descs[:T]], watermark_bytes=args.watermark_kib << 10,
                      timeout_s=120) if is_trainer else None
    p2p_arena = None
    for version in range(1, args.reps + 1):
        shards = local_shards(tr, rank, version) if is_trainer else None
        if not is_trainer:
            rx.expect(version)
        dist.barrier()
        t0 = time.monotonic()
        if is_trainer:
            trainer.update(version, shards)
        else:
            assert rx.wait(version, 300), f"version {version} incomplete"
            p2p_arena = rx.arena.copy()
        result["p2p"].append({"start": t0, "end": time.monotonic()})
        dist.barrier()
    if is_trainer:
        result["stats"] = trainer.stats()

    # The rank-0 baseline, same data (the last version's shards).
    version = args.reps
    images = sched.doc["images"]
    image_sizes = [im["bytes"] + im["scale_bytes"] for im in images]
    dist.barrier()
    t0 = time.monotonic()
    if is_trainer:
        shards = local_shards(tr, rank, version)
        flat = np.concatenate([np.ascontiguousarray(shards[p.name]).view(np.uint8).reshape(-1) for p in tr.params])
        if rank != 0:
            dist.send(torch.from_numpy(flat), dst=0)
        else:
            pieces = {0: flat}
            for t in range(1, T):
                n = sum(int(np.prod([h - l for l, h in zip(*local_box(p.shape, p.placements, tr.mesh, mesh_coords(tr.mesh, t)))]))
                        * (2 if p.dtype == "bfloat16" else 4) for p in tr.params)
                buf = torch.empty(n, dtype=torch.uint8)
                dist.recv(buf, src=t)
                pieces[t] = buf.numpy()
            views = []
            for p in tr.params:
                item = np.uint16 if p.dtype == "bfloat16" else np.float32
                full = np.zeros(p.shape, item)
                for t in range(T):
                    off = sum(int(np.prod([h - l for l, h in zip(*local_box(q.shape, q.placements, tr.mesh, mesh_coords(tr.mesh, t)))]))
                              * (2 if q.dtype == "bfloat16" else 4) for q in tr.params[:tr.params.index(p)])
                    lo, hi = local_box(p.shape, p.placements, tr.mesh, mesh_coords(tr.mesh, t))
                    n = int(np.prod([h - l for l, h in zip(lo, hi)]))
                    full[tuple(slice(l, h) for l, h in zip(lo, hi))] = (
                        pieces[t][off:off + n * np.dtype(item).itemsize].view(item).reshape([h - l for l, h in zip(lo, hi)]))
                views.append((p.name, full.view(np.uint8), p.dtype, [0] * len(p.shape), list(p.shape)))
            blob = b"".join(native.prepare_images(sched.json, views))
            dist.send(torch.frombuffer(bytearray(blob), dtype=torch.uint8), dst=T)
    else:
        r = rank - T
        if r == 0:
            blob = torch.empty(sum(image_sizes), dtype=torch.uint8)
            dist.recv(blob, src=0)
            blob = blob.numpy()
            starts = np.concatenate([[0], np.cumsum(image_sizes)])
            for dst in list(range(1, R)) + [0]:
                arena = np.zeros(sched.arena_bytes(dst), np.uint8)
                for t, image, off, nbytes, soff, snbytes in sched.doc["arenas"][dst]:
                    s = starts[image]
                    arena[off:off + nbytes] = blob[s:s + nbytes]
                    arena[soff:soff + snbytes] = blob[s + nbytes:s + nbytes + snbytes]
                if dst:
                    dist.send(torch.from_numpy(arena), dst=T + dst)
                else:
                    mine = arena
        else:
            buf = torch.empty(sched.arena_bytes(r), dtype=torch.uint8)
            dist.recv(buf, src=T)
            mine = buf.numpy()
        result["baseline_equals_p2p"] = bool(np.array_equal(mine, p2p_arena))
    result["baseline"].append({"start": t0, "end": time.monotonic()})
    dist.barrier()
    Path(args.dir, f"result-{rank}.json").write_text(json.dumps(result))
    engine.stop()
    os._exit(0)


def drive(args) -> int:
    from testbed import Testbed, rate_bits_per_second, unavailable_reason

    from fabric_lib.weights import baseline_estimate, plan, plan_input_json, simulate

    why = unavailable_reason()
    if why:
        print(f"skipped: {why}")
        return 77
    T, R = args.trainers, args.inference
    tr, inf, rules = layouts(T, R, args.hidden, args.experts)
    bw = rate_bits_per_second(args.rate) / 8
    text = plan_input_json(tr, inf, rules)
    sched = plan(text, max_chunk_bytes=args.chunk_kib << 10, nic_bytes_per_s=bw)
    sim = simulate(sched, bw, args.watermark_kib << 10)
    base = baseline_estimate(text, sched, bw)
    work = Path(tempfile.mkdtemp(prefix="weights-netbed-"))
    (work / "schedule.json").write_text(sched.json)
    env = dict(os.environ, PYTHONPATH=PACKAGE, FABRIC_PYTHON_PACKAGE=PACKAGE, GLOO_SOCKET_IFNAME="nic0",
               FI_TCP_IFACE="nic0", FI_SOCKETS_IFACE="nic0")
    with Testbed("wbench", hosts=T + R, nics=1, rate=args.rate) as bed:
        procs = [bed.popen(h, [sys.executable, __file__, "--proc", "--rank", str(h), "--dir", str(work),
                               "--master", bed.address(0, 0), "--address", bed.address(h, 0),
                               "--trainers", str(T), "--inference", str(R), "--hidden", str(args.hidden),
                               "--experts", str(args.experts), "--reps", str(args.reps),
                               "--watermark-kib", str(args.watermark_kib)], env=env)
                 for h in range(T + R)]
        deadline = time.monotonic() + args.timeout
        for p in procs:
            try:
                p.wait(max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                print("timed out")
                return 1
        if any(p.returncode for p in procs):
            print("a process failed:", [p.returncode for p in procs])
            return 1
    results = [json.loads((work / f"result-{h}.json").read_text()) for h in range(T + R)]
    p2p = [max(r["p2p"][i]["end"] for r in results) - min(r["p2p"][i]["start"] for r in results)
           for i in range(args.reps)]
    baseline = max(r["baseline"][0]["end"] for r in results) - min(r["baseline"][0]["start"] for r in results)
    measured = min(p2p[1:] or p2p)  # the first update warms connections
    out = {
        "trainers": T, "inference": R, "rate": args.rate, "nic_bytes_per_s": bw,
        "watermark_bytes": args.watermark_kib << 10, "hidden": args.hidden, "chunk_bytes": args.chunk_kib << 10,
        "bound_s": sched.prediction["bound_s"], "group_bound_s": sched.prediction["group_bound_s"],
        "sim_s": sim["time_s"], "p2p_measured_s": p2p, "p2p_s": measured,
        "measured_over_sim": measured / sim["time_s"],
        "baseline_estimate_s": base["time_s"], "baseline_measured_s": baseline,
        "baseline_over_estimate": baseline / base["time_s"],
        "speedup_measured": baseline / measured, "speedup_predicted": base["time_s"] / sim["time_s"],
        "baseline_equals_p2p": all(r.get("baseline_equals_p2p", True) for r in results),
        "writes_total": len(sched.doc["writes"]),
        "trainer_stats": [r.get("stats") for r in results[:T]],
    }
    out["speedup_over_predicted"] = out["speedup_measured"] / out["speedup_predicted"]
    print(json.dumps({k: v for k, v in out.items() if k != "trainer_stats"}, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    if not out["baseline_equals_p2p"]:
        print("FAILED: the baseline and the P2P update left different bytes")
        return 1
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trainers", type=int, default=4)
    ap.add_argument("--inference", type=int, default=2)
    ap.add_argument("--rate", default="100mbit")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--chunk-kib", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--watermark-kib", type=int, default=64 << 10, help="each trainer's bytes in flight")
    ap.add_argument("--timeout", type=float, default=500)
    ap.add_argument("--json")
    ap.add_argument("--proc", action="store_true")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--dir")
    ap.add_argument("--master")
    ap.add_argument("--address")
    args = ap.parse_args()
    if args.proc:
        proc(args)
        return 0
    return drive(args)


if __name__ == "__main__":
    sys.exit(main())
