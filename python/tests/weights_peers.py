"""The small model of tests/weights (C++), its single-process reference in numpy and
ml_dtypes, and the trainer / inference roles of the multi-process weight-transfer test."""

from __future__ import annotations

import os
import zlib
from typing import Any

import numpy as np

from peers import VICTIM_IDLE, expect, wait_until_quiet

from fabric_lib.weights import (
    InferenceLayout, MeshGroup, NameRule, Replicate, Shard, SourceParam, TargetParam, TrainerLayout,
    local_box, mesh_coords,
)

TRAINER = TrainerLayout(
    mesh=[("dp", 4)],
    groups=[MeshGroup("dense", ["dp"]), MeshGroup("experts", [])],
    params=[
        SourceParam("q", [512, 256], "bfloat16", [Shard(0)], "dense"),
        SourceParam("k", [256, 256], "bfloat16", [Shard(0)], "dense"),
        SourceParam("v", [256, 256], "bfloat16", [Shard(0)], "dense"),
        SourceParam("o", [256, 512], "bfloat16", [Shard(0)], "dense"),
        SourceParam("gate", [384, 256], "bfloat16", [Shard(0)], "dense"),
        SourceParam("up", [384, 256], "bfloat16", [Shard(0)], "dense"),
        SourceParam("norm", [256], "float32", [Shard(0)], "dense"),
        SourceParam("head_t", [256, 1000], "bfloat16", [Shard(1)], "dense"),
        SourceParam("w1", [8, 256, 256], "bfloat16", [Shard(0)], "experts"),
        SourceParam("w3", [8, 256, 256], "bfloat16", [Shard(0)], "experts"),
        SourceParam("w2", [8, 256, 256], "bfloat16", [Shard(0)], "experts"),
    ],
)
INFERENCE = InferenceLayout(
    mesh=[("tp", 2)],
    params=[
        TargetParam("qkv", [1024, 256], "float8_e4m3fn", [Shard(0)], "block128"),
        TargetParam("o_proj", [256, 512], "float8_e4m3fn", [Shard(1)], "per_channel"),
        TargetParam("gate_up", [768, 256], "bfloat16", [Shard(0)]),
        TargetParam("norm", [256], "bfloat16", [Replicate()]),
        TargetParam("lm_head", [1000, 256], "bfloat16", [Shard(0)]),
        TargetParam("w13", [8, 512, 256], "float8_e4m3fn", [Shard(0)], "block128"),
        TargetParam("w2", [8, 256, 256], "float8_e4m3fn", [Shard(0)], "per_channel"),
    ],
)
RULES = [
    NameRule("qkv", ["q", "k", "v"]),
    NameRule("o_proj", ["o"]),
    NameRule("gate_up", ["gate", "up"]),
    NameRule("norm", ["norm"]),
    NameRule("lm_head", ["head_t"], transpose=True),
    NameRule("w13", ["w1", "w3"], fuse_dim=1),
    NameRule("w2", ["w2"]),
]


def global_values(version: int) -> dict[str, np.ndarray]:
    """float32 values of every trainer parameter at `version` (bfloat16 ones exactly representable)."""
    import ml_dtypes

    out = {}
    for p in TRAINER.params:
        rng = np.random.default_rng(zlib.crc32(f"{p.name}/{version}".encode()))
        x = (rng.standard_normal(p.shape) * (1 + version)).astype(np.float32)
        if p.dtype == "bfloat16":
            x = x.astype(ml_dtypes.bfloat16).astype(np.float32)
        out[p.name] = x
    return out


def local_shards(version: int, rank: int) -> dict[str, np.ndarray]:
    """What trainer `rank` holds at `version`: bfloat16 as uint16 bits."""
    import ml_dtypes

    g = global_values(version)
    coords = mesh_coords(TRAINER.mesh, rank)
    out = {}
    for p in TRAINER.params:
        box = local_box(p.shape, p.placements, TRAINER.mesh, coords)
        if box is None:
            continue
        piece = g[p.name][tuple(slice(l, h) for l, h in zip(*box))]
        out[p.name] = piece.astype(ml_dtypes.bfloat16).view(np.uint16) if p.dtype == "bfloat16" else piece
    return out


# ------------------------------------------------------------------ the reference


def _fp8(x: np.ndarray) -> np.ndarray:
    import ml_dtypes

    return np.clip(x, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def _scale(amax: np.ndarray) -> np.ndarray:
    amax = amax.astype(np.float32)
    return np.where(amax > 0, amax / np.float32(448), np.float32(1)).astype(np.float32)


def _block(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    *outer, rows, cols = x.shape
    br, bc = -(-rows // 128), -(-cols // 128)
    q = np.zeros(x.shape, np.uint8)
    s = np.zeros((*outer, br, bc), np.float32)
    for i in range(br):
        for j in range(bc):
            blk = x[..., i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
            sc = _scale(np.abs(blk).max(axis=(-1, -2)))
            s[..., i, j] = sc
            q[..., i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = _fp8(blk / sc[..., None, None])
    return q, s


def reference_entry(name: str, rank: int, g: dict[str, np.ndarray]) -> tuple[bytes, bytes]:
    """(data bytes, scale bytes) of target `name` on inference rank `rank`, computed directly."""
    import ml_dtypes

    target = next(t for t in INFERENCE.params if t.name == name)
    rule = next(r for r in RULES if r.target == name)
    coords = mesh_coords(INFERENCE.mesh, rank)
    datas, scales = [], []
    for src in rule.sources:
        full = g[src]
        if rule.transpose:
            full = np.swapaxes(full, -1, -2)
        lo, hi = local_box(full.shape, target.placements, INFERENCE.mesh, coords)
        local = full[tuple(slice(l, h) for l, h in zip(lo, hi))]
        if target.quant == "none":
            datas.append(local.astype(ml_dtypes.bfloat16).view(np.uint16) if target.dtype == "bfloat16" else local)
        elif target.quant == "block128":
            q, s = _block(local)
            datas.append(q)
            scales.append(s)
        else:  # per output channel: the whole global row decides the scale
            rows = full[tuple(slice(l, h) for l, h in zip(lo[:-1], hi[:-1]))]
            sc = _scale(np.abs(rows).max(axis=-1))
            datas.append(_fp8(local / sc[..., None]))
            scales.append(sc)
    data = np.concatenate(datas, axis=rule.fuse_dim) if len(datas) > 1 else datas[0]
    scale = b""
    if scales:
        scale = (np.concatenate(scales, axis=rule.fuse_dim) if len(scales) > 1 else scales[0]).tobytes()
    return np.ascontiguousarray(data).tobytes(), scale


# ------------------------------------------------------------------ roles


def inference_role(conn: Any, provider: str, schedule_json: str, rank: int) -> None:
    import fabric_lib as fl
    from fabric_lib.weights import Receiver, Schedule

    with fl.Engine(provider) as engine:
        rx = Receiver(engine, Schedule(schedule_json), rank)
        conn.send((bytes(rx.desc), rx.imm_block))
        while True:
            msg = expect(conn)
            if msg[0] == "expect":
                rx.expect(msg[1])
                conn.send("armed")
            elif msg[0] == "wait":
                ok = rx.wait(msg[1], msg[2])
                conn.send((ok, rx.complete_version, rx.arena.tobytes()))
            else:
                return


def trainer_role(conn: Any, provider: str, schedule_json: str, rank: int, port: int, timeout_s: float,
                 victim: bool = False) -> None:
    from datetime import timedelta

    import torch.distributed as dist

    import fabric_lib as fl
    from fabric_lib.weights import Schedule, Trainer, reserve_update_imms

    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=4,
                            timeout=timedelta(seconds=60))
    engine = fl.Engine(provider, **(VICTIM_IDLE if victim else {}))
    word = np.zeros(64, np.uint8)
    _, desc = engine.reg_mr(word)
    imms = reserve_update_imms(engine)  # where this rank counts the others' barriers
    conn.send((bytes(desc), (imms.first, imms.count)))
    arenas, barriers = expect(conn)
    schedule = Schedule(schedule_json)
    trainer = Trainer(engine, schedule, TRAINER, rank, [fl.MrDesc.from_bytes(a) for a, _ in arenas],
                      [fl.MrDesc.from_bytes(b) for b, _ in barriers], inference_imms=[i for _, i in arenas],
                      trainer_imms=[i for _, i in barriers], process_group=dist.group.WORLD,
                      watermark_bytes=1 << 20, timeout_s=timeout_s)
    while True:
        msg = expect(conn)
        if msg[0] != "update":
            break
        _, version, die = msg
        shards = local_shards(version, rank)
        try:
            trainer.update(version, shards, stop_after_group=0 if die else None)
        except fl.FabricError as e:
            conn.send(("failed", f"{type(e).__name__}: {e}"))
            continue
        if die:
            # Killed once its WRITEs have completed.
            wait_until_quiet(lambda: engine.outstanding_requests)
            conn.send(("dense sent", None))
            expect(conn, timeout=600)  # killed here
        conn.send(("ok", trainer.stats()))
    engine.stop()
    conn.close()
    os._exit(0)  # a killed peer can leave gloo's teardown waiting; nothing else is left to run
