"""The rank of test_one_engine: ONE fabric_lib.Engine, and on it this rank's part of the KV,
weights and MoE workloads (the C++ tests/workloads, in Python). Set up in turn, then run at the
same time on three threads; the rank checks every byte against a reference computed here and
reports its counts, and the immediates its engine received, to the test."""

from __future__ import annotations

import threading
import time
import zlib
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import numpy as np

from peers import STEP_S, expect

RANKS = 3
TRAINER = 0  # weights: the one trainer; processes 1 and 2 are inference ranks 0 and 1
KV_RECEIVER = 2  # KV: decodes what ranks 0 and 1 prefill
KV_REQUESTS = 6  # per KV sender
WEIGHTS_VERSIONS = 3
MOE_ITERATIONS = 10
WAIT_S = 30.0  # every wait of a workload
REQUEST_TIMEOUT_MS = 20000

# ------------------------------------------------------------------ the relay


def relay_gather(conn: Any) -> Callable[[Any], list[Any]]:
    """An all_gather among the ranks through the test, which answers once every rank asked."""

    def gather(mine: Any) -> list[Any]:
        conn.send(("gather", mine))
        return expect(conn)

    return gather


# ------------------------------------------------------------------ KV

KV_LAYERS, KV_PAGES, KV_HEADS, KV_HEAD_SIZE = 2, 8, 2, 16


def kv_layout() -> Any:
    import fabric_lib.kv as fkv

    # vLLM's CPU layout, one token per page: every byte of every region is in a page.
    return fkv.vllm_cpu(KV_LAYERS, KV_PAGES, 1, KV_HEADS, 0, KV_HEADS, KV_HEAD_SIZE, 4)


def kv_caches() -> list[np.ndarray]:
    return [np.zeros((KV_PAGES, KV_HEADS, 1, 2 * KV_HEAD_SIZE), np.float32) for _ in range(KV_LAYERS)]


def kv_fill(request_id: str, caches: list[np.ndarray]) -> None:
    """Request `request_id`'s values, different in every byte position and request."""
    for layer, c in enumerate(caches):
        rng = np.random.default_rng(zlib.crc32(f"{request_id}/{layer}".encode()))
        c.view(np.uint32)[...] = rng.integers(0, 2**32, c.shape, dtype=np.uint32)


def kv_id(sender: int, k: int) -> str:
    return f"s{sender}-{k}"


@dataclass
class Outcome:
    done: int = 0
    imms: int = 0  # immediates this workload counted on this rank's engine
    error: str = ""

    def fail(self, why: str) -> None:
        self.error = self.error or why


def kv_send(sender: Any, caches: list[np.ndarray], rank: int) -> Outcome:
    from fabric_lib.kv import TERMINAL

    out = Outcome()
    pages = list(range(KV_PAGES))
    for k in range(KV_REQUESTS):
        rid = kv_id(rank, k)
        kv_fill(rid, caches)  # the previous request is done: its pages are free to refill
        sender.prepare(rid, pages, KV_PAGES)
        for layer in range(KV_LAYERS):
            sender.layer_done(rid, layer)
        deadline = time.monotonic() + WAIT_S
        state, error = sender.poll(rid)
        while state not in TERMINAL and time.monotonic() < deadline:
            time.sleep(0.002)  # the Python Sender has no state callback: poll, bounded
            state, error = sender.poll(rid)
        if state != "done":
            out.fail(f"kv sender {rank}: {rid} {state} ({error})")
            return out
        sender.release(rid)
        out.done += 1
    return out


def kv_receive(receiver: Any, sources: list[int], caches: list[np.ndarray]) -> Outcome:
    out = Outcome()
    pages = list(range(KV_PAGES))
    want = kv_caches()
    for k in range(KV_REQUESTS):
        for sender, source in enumerate(sources):
            rid = kv_id(sender, k)
            expected = receiver.request(rid, pages, KV_PAGES, [source])
            state, error = receiver.wait(rid, WAIT_S)
            if state != "done":
                out.fail(f"kv receiver: {rid} {state} ({error})")
                return out
            kv_fill(rid, want)
            for layer, (got, ref) in enumerate(zip(caches, want)):
                if got.tobytes() != ref.tobytes():
                    diff = np.flatnonzero(got.view(np.uint8) != ref.view(np.uint8))
                    out.fail(f"kv receiver: {rid} layer {layer}: {diff.size} bytes differ, first at {diff[0]}")
                    return out
            receiver.release(rid)
            out.imms += int(expected)
            out.done += 1
    return out


# ------------------------------------------------------------------ weights


def weights_schedule(tp: int = 2) -> Any:
    """A trainer holding two whole bfloat16 matrices, an inference mesh of TP 2 (one row-, one
    column-sharded), several chunks per target (tests/workloads/weights_work.cpp's model)."""
    from fabric_lib.weights import (InferenceLayout, MeshGroup, NameRule, Shard, SourceParam, TargetParam,
                                    TrainerLayout, plan, plan_input_json)

    trainer = TrainerLayout([("dp", 1)], [MeshGroup("dense", ["dp"])],
                            [SourceParam("a", [64, 96], "bfloat16", [Shard(0)], "dense"),
                             SourceParam("b", [96, 64], "bfloat16", [Shard(0)], "dense")])
    inference = InferenceLayout([("tp", tp)], [TargetParam("a", [64, 96], "bfloat16", [Shard(0)]),
                                               TargetParam("b", [96, 64], "bfloat16", [Shard(1)])])
    return trainer, plan(plan_input_json(trainer, inference, [NameRule("a", ["a"]), NameRule("b", ["b"])]),
                         max_chunk_bytes=8 << 10)


def weights_values(version: int) -> dict[str, np.ndarray]:
    """Version `version` of both matrices, as bfloat16 bits (float32 values cut to bfloat16)."""
    shapes = {"a": (64, 96), "b": (96, 64)}
    out = {}
    for name, shape in shapes.items():
        rng = np.random.default_rng(zlib.crc32(f"{name}/{version}".encode()))
        f = rng.standard_normal(shape).astype(np.float32) * (1 + version)
        out[name] = (f.view(np.uint32) >> 16).astype(np.uint16)
    return out


ACK_IMMS = 64  # the trainer's reserved acknowledgement values, one per version modulo this


def weights_train(engine: Any, trainer: Any, acks: Any) -> Outcome:
    """Each version sent whole, then acknowledged by both inference ranks (an immediate each to
    the trainer's reserved values), so the next never overwrites an arena still being checked."""
    out = Outcome()
    for version in range(1, WEIGHTS_VERSIONS + 1):
        trainer.update(version, weights_values(version))
        imm = acks.at(version % ACK_IMMS)
        counter = engine.imm_counter(imm)
        try:
            counter.wait_and_consume(RANKS - 1, timeout=WAIT_S)
        finally:
            engine.release_imm_counter(imm)
        out.imms += RANKS - 1
        out.done += 1
    return out


def weights_receive(engine: Any, receiver: Any, index: int, ack_desc: Any, ack_first: int) -> Outcome:
    from fabric_lib.weights import local_box

    out = Outcome()
    expected = receiver.schedule.expected_imms(index)
    for version in range(1, WEIGHTS_VERSIONS + 1):
        receiver.expect(version)
        if not receiver.wait(version, WAIT_S):
            out.fail(f"weights inference rank {index}: version {version} incomplete within {WAIT_S} s")
            return out
        values = weights_values(version)
        for name, (got, _) in receiver.tensors().items():
            placement = ["S(0)"] if name == "a" else ["S(1)"]
            lo, hi = local_box(values[name].shape, placement, [("tp", 2)], [index])
            want = values[name][tuple(slice(l, h) for l, h in zip(lo, hi))]
            if not np.array_equal(got, want):
                out.fail(f"weights inference rank {index}: version {version}: '{name}' differs")
                return out
        out.imms += expected
        out.done += 1
        engine.imm(ack_first + version % ACK_IMMS, ack_desc).wait(WAIT_S)
    return out


# ------------------------------------------------------------------ MoE

MOE_EXPERTS, MOE_HIDDEN, MOE_TOKENS, MOE_TOPK = 2 * RANKS, 32, 8, 2


def moe_inputs(rank: int, it: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, topk_idx, topk_weights) of `rank` at iteration `it`: values with few mantissa bits, so
    every product and sum below is exact in float32 whatever the order."""
    rng = np.random.default_rng(1000 * it + rank)
    tokens = int(rng.integers(0, MOE_TOKENS + 1))
    x = (rng.integers(-128, 128, (tokens, MOE_HIDDEN)) / 128).astype(np.float32)
    topk = np.array([rng.permutation(MOE_EXPERTS)[:MOE_TOPK] for _ in range(tokens)], np.int32)
    topk = topk.reshape(tokens, MOE_TOPK)
    weights = (rng.integers(-128, 128, (tokens, MOE_TOPK)) / 128).astype(np.float32)
    return x, topk, weights


def moe_expert(e: int, rows: np.ndarray) -> np.ndarray:
    return (rows * np.float32(1 + e / 8)).astype(np.float32)


def moe_run(buf: Any, rank: int) -> Outcome:
    out = Outcome()
    first = buf.layout["first_expert"]
    for it in range(MOE_ITERATIONS):
        x, topk, w = moe_inputs(rank, it)
        recv_x, recv_count, handle = buf.dispatch(x, topk, w)
        y = np.zeros_like(recv_x)
        for local, rows in enumerate(buf.expert_rows(recv_x, handle)):
            e = first + local
            # What expert e must receive: every rank's tokens routed to it, by (rank, token).
            want = [xs[t] for s in range(RANKS) for xs, ts, _ in [moe_inputs(s, it)]
                    for t in range(xs.shape[0]) if e in ts[t]]
            want = np.array(want, np.float32).reshape(len(want), MOE_HIDDEN)
            if not np.array_equal(rows, want):
                out.fail(f"moe rank {rank}: iteration {it}: expert {e} received other rows")
                return out
            b = handle.expert_begin[local]
            y[b:b + rows.shape[0]] = moe_expert(e, rows)
        got = buf.combine(y, handle)
        ref = np.zeros((x.shape[0], MOE_HIDDEN), np.float32)
        for k in range(MOE_TOPK):
            for t in range(x.shape[0]):
                ref[t] += w[t, k] * moe_expert(int(topk[t, k]), x[t])
        if not np.array_equal(got, ref):
            out.fail(f"moe rank {rank}: iteration {it}: combine differs from the dense reference")
            return out
        out.done += 1
    buf.quiesce()
    out.imms = int(buf.stats()["imms_consumed"])
    return out


# ------------------------------------------------------------------ the rank


@dataclass
class Published:
    addr: bytes
    arena: tuple[bytes, tuple[int, int]] | None = None  # inference ranks: (MrDesc, imm_block)
    acks: tuple[bytes, int] | None = None  # the trainer: (MrDesc, first ack value)


def rank_role(conn: Any, provider: str, rank: int) -> None:
    import fabric_lib as fl
    import fabric_lib.kv as fkv
    from fabric_lib.moe import Buffer
    from fabric_lib.weights import Receiver, Trainer

    gather = relay_gather(conn)
    with fl.Engine(provider, request_timeout_ms=REQUEST_TIMEOUT_MS) as engine:
        # Every workload on this one engine, each with immediates of its own.
        caches = kv_caches()
        if rank == KV_RECEIVER:
            kv = fkv.Receiver(kv_layout(), caches, engine=engine, quarantine_ms=1000)
        else:
            kv = fkv.Sender(kv_layout(), caches, engine=engine)
        trainer_layout, schedule = weights_schedule()
        mine = Published(bytes(engine.main_address))
        if rank == TRAINER:
            ack_word = np.zeros(64, np.uint8)
            _, ack_desc = engine.reg_mr(ack_word)
            acks = engine.reserve_imms(ACK_IMMS, "test.weights-acks")
            mine.acks = (bytes(ack_desc), acks.first)
        else:
            rx = Receiver(engine, schedule, rank - 1)
            mine.arena = (bytes(rx.desc), rx.imm_block)
        everyone: list[Published] = gather(mine)
        # MoE agrees on its immediates among the ranks inside the Buffer (its own gathers).
        buf = Buffer(rank, RANKS, MOE_EXPERTS, MOE_HIDDEN, MOE_TOKENS, MOE_TOPK, all_gather=gather,
                     engine=engine, x_dtype="f32", combine_dtype="f32", out_dtype="f32",
                     max_private_tokens=2, timeout_ms=int(WAIT_S * 1000))
        if rank == TRAINER:
            inference = everyone[1:]
            trainer = Trainer(engine, schedule, trainer_layout, 0,
                              [fl.MrDesc.from_bytes(p.arena[0]) for p in inference], [],
                              inference_imms=[p.arena[1] for p in inference], timeout_s=WAIT_S)
        sources = []
        if rank == KV_RECEIVER:
            sources = [kv.connect(everyone[s].addr, WAIT_S) for s in range(2)]
        gather("go")  # every rank is set up

        outcomes: dict[str, Outcome] = {}

        def run(name: str, f: Callable[[], Outcome]) -> None:
            try:
                outcomes[name] = f()
            except BaseException as e:  # noqa: BLE001 - reported as this workload's failure
                outcomes[name] = Outcome(error=f"{name}: {type(e).__name__}: {e}")

        if rank == KV_RECEIVER:
            kv_work = partial(kv_receive, kv, sources, caches)
        else:
            kv_work = partial(kv_send, kv, caches, rank)
        if rank == TRAINER:
            weights_work = partial(weights_train, engine, trainer, acks)
        else:
            ack_desc, ack_first = everyone[TRAINER].acks
            weights_work = partial(weights_receive, engine, rx, rank - 1, fl.MrDesc.from_bytes(ack_desc), ack_first)
        work = {"kv": kv_work, "weights": weights_work, "moe": partial(moe_run, buf, rank)}
        threads = [threading.Thread(target=run, args=item, daemon=True) for item in work.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(STEP_S)
        if any(t.is_alive() for t in threads):
            raise TimeoutError(f"rank {rank}: a workload still runs after {STEP_S} s")
        report = {name: (o.done, o.error) for name, o in outcomes.items()}
        report["moe_stray"] = buf.stats()["stray_immediates"]
        report["imms_received"] = engine.metrics()["imms_received"]
        report["imms_claimed"] = sum(o.imms for o in outcomes.values())
        conn.send(("report", report))
        expect(conn)  # the others are done with this engine too
        buf.close()
        kv.close()
        if rank != TRAINER:
            rx.close()
