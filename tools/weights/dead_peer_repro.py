"""Repro (engine, not weights): after a trainer's barrier WRITE to a SIGKILLed peer times out
("completion flag not set within the timeout") on tcp, the same fabric Engine cannot finish the
next update with a new, live peer: the new barrier in either direction never arrives.

    PYTHONPATH=build/default/python python3 tools/weights/dead_peer_repro.py [--provider tcp] [--reps 5]

Per rep, in one process (inference Receiver + trainer 0) and a child (trainer 1): v1 completes;
the child writes its half of v2 without barrier and is SIGKILLed; trainer 0's v2 fails (fast with
"Broken pipe", or after the 4 s timeout with "completion flag not set"); a new child and a new
Trainer on the SAME trainer-0 Engine send v3. Seen on tcp (2026-12-03, build of 484da01): 4 of 4 reps; when v2 failed
by timeout, v3 failed on both trainers after 14 s; when v2 failed with Broken pipe, v3 completed
in 0.06 s. tests/weights/vllm works around it by giving a failed trainer rank a new Engine.
Exit 1 when any rep's v3 did not complete."""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time

import numpy as np

import fabric_lib as fl
from fabric_lib.weights import (InferenceLayout, MeshGroup, NameRule, Receiver, Shard, SourceParam, TargetParam,
                                Trainer, TrainerLayout, local_box, plan, plan_input_json)

SHAPE = [4096, 256]
LAYOUT = TrainerLayout([("fsdp", 2)], [MeshGroup("all")], [SourceParam("w", SHAPE, "float32", [Shard(0)], "all")])
TARGETS = InferenceLayout([("tp", 1)], [TargetParam("w", SHAPE, "float32", ["R"])])


def schedule():
    return plan(plan_input_json(LAYOUT, TARGETS, [NameRule("w", ["w"])]), max_chunk_bytes=1 << 20)


def half(rank: int) -> dict[str, np.ndarray]:
    full = np.random.default_rng(0).standard_normal(SHAPE, dtype=np.float32)
    lo, hi = local_box(SHAPE, [Shard(0)], [("fsdp", 2)], [rank])
    return {"w": full[lo[0]:hi[0]]}


def child(conn, provider: str) -> None:
    e = fl.Engine(provider)
    word = np.zeros(64, np.uint8)
    conn.send(bytes(e.reg_mr(word)[1]))
    arena, barriers = conn.recv()
    t = Trainer(e, schedule(), LAYOUT, 1, [fl.MrDesc.from_bytes(arena)], [fl.MrDesc.from_bytes(b) for b in barriers],
                timeout_s=4.0)
    while True:
        v, partial = conn.recv()
        try:
            t.update(v, half(1), stop_after_group=0 if partial else None)
            conn.send("ok")
        except fl.FabricError as ex:
            conn.send(str(ex))


def rep(provider: str) -> bool:
    ctx = mp.get_context("spawn")
    s = schedule()
    inf = fl.Engine(provider)
    rx = Receiver(inf, s, 0)
    e0 = fl.Engine(provider)
    w0 = np.zeros(64, np.uint8)
    b0 = bytes(e0.reg_mr(w0)[1])
    procs = []

    def start():
        a, b = ctx.Pipe()
        p = ctx.Process(target=child, args=(b, provider))
        p.start()
        procs.append(p)
        b1 = a.recv()
        a.send((bytes(rx.desc), [b0, b1]))
        return p, a, Trainer(e0, s, LAYOUT, 0, [rx.desc], [fl.MrDesc.from_bytes(b0), fl.MrDesc.from_bytes(b1)],
                             timeout_s=4.0)

    def update(t, v):
        try:
            t.update(v, half(0))
            return "ok"
        except fl.FabricError as ex:
            return str(ex)

    try:
        p, c, t0 = start()
        rx.expect(1)
        c.send((1, False))
        print("v1", update(t0, 1), c.recv(), rx.wait(1, 10), flush=True)
        rx.expect(2)
        c.send((2, True))
        c.recv()
        p.kill()
        p.join(10)
        print("v2 (peer killed)", update(t0, 2), rx.wait(2, 2), flush=True)
        p, c, t0 = start()
        rx.expect(3)
        c.send((3, False))
        t = time.monotonic()
        mine = update(t0, 3)
        theirs = c.recv() if c.poll(30) else "no answer in 30 s"
        ok = rx.wait(3, 10)
        print(f"v3 (new peer, same engine): trainer 0 {mine!r}, trainer 1 {theirs!r}, complete {ok}, "
              f"{time.monotonic() - t:.2f} s", flush=True)
        return ok
    finally:
        for p in procs:
            p.kill()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--provider", default="tcp")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    results = []
    for i in range(a.reps):
        r, w = os.pipe()
        pid = os.fork()  # each rep in its own process: a wedged engine must not stop the next
        if pid == 0:
            os.close(r)
            ok = rep(a.provider)
            os.write(w, b"1" if ok else b"0")
            os._exit(0)
        os.close(w)
        got = os.read(r, 1)
        os.waitpid(pid, 0)
        results.append(got == b"1")
        print(f"rep {i}: v3 {'completed' if results[-1] else 'FAILED'}", flush=True)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
