"""Roles of test_weights_dead_peer: two trainers of one fsdp-sharded matrix, one of which the test
kills between updates."""

from __future__ import annotations

from typing import Any

import numpy as np

import fabric_lib as fl
from fabric_lib.weights import (InferenceLayout, MeshGroup, NameRule, Shard, SourceParam, TargetParam, Trainer,
                                TrainerLayout, local_box, plan, plan_input_json, reserve_update_imms)

from peers import VICTIM_IDLE

SHAPE = [4096, 256]
LAYOUT = TrainerLayout([("fsdp", 2)], [MeshGroup("all")], [SourceParam("w", SHAPE, "float32", [Shard(0)], "all")])
TARGETS = InferenceLayout([("tp", 1)], [TargetParam("w", SHAPE, "float32", ["R"])])
TIMEOUT_S = 4.0  # the trainers' bound on each wait


def schedule():
    return plan(plan_input_json(LAYOUT, TARGETS, [NameRule("w", ["w"])]), max_chunk_bytes=1 << 20)


def half(rank: int) -> dict[str, np.ndarray]:
    full = np.random.default_rng(0).standard_normal(SHAPE, dtype=np.float32)
    lo, hi = local_box(SHAPE, [Shard(0)], [("fsdp", 2)], [rank])
    return {"w": full[lo[0]:hi[0]]}


def second_trainer(conn: Any, provider: str) -> None:
    """Trainer 1: sends its barrier word's MrDesc and immediate block, then runs ("update",
    version, partial) commands; a partial update writes its shard and skips the barrier."""
    engine = fl.Engine(provider, **VICTIM_IDLE)
    word = np.zeros(64, np.uint8)
    imms = reserve_update_imms(engine)
    conn.send((bytes(engine.reg_mr(word)[1]), (imms.first, imms.count)))
    arena, arena_imms, barriers, barrier_imms = conn.recv()
    trainer = Trainer(engine, schedule(), LAYOUT, 1, [fl.MrDesc.from_bytes(arena)],
                      [fl.MrDesc.from_bytes(b) for b in barriers], inference_imms=[arena_imms],
                      trainer_imms=barrier_imms, timeout_s=TIMEOUT_S)
    while True:
        msg = conn.recv()
        if msg[0] == "done":
            return
        _, version, partial = msg
        try:
            trainer.update(version, half(1), stop_after_group=0 if partial else None)
            conn.send("ok")
        except fl.FabricError as ex:
            conn.send(f"{type(ex).__name__}: {ex}")
