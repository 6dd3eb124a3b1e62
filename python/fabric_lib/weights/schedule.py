"""A planned schedule (the C++ planner's JSON), with what each side needs from it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .. import _weights as _w


@dataclass(frozen=True)
class ArenaEntry:
    target: str
    offset: int
    nbytes: int
    scale_offset: int
    scale_nbytes: int
    local_shape: tuple[int, ...]
    scale_shape: tuple[int, ...]
    dtype: str


class Schedule:
    """Immutable; `json` is what travels to every rank."""

    def __init__(self, text: str) -> None:
        self.json = text
        self.doc: dict[str, Any] = json.loads(text)

    @property
    def trainer_ranks(self) -> int:
        return int(self.doc["trainer_ranks"])

    @property
    def inference_ranks(self) -> int:
        return int(self.doc["inference_ranks"])

    @property
    def targets(self) -> list[dict[str, Any]]:
        return self.doc["targets"]

    @property
    def group_names(self) -> list[str]:
        return self.doc["groups"]

    @property
    def prediction(self) -> dict[str, Any]:
        return self.doc["prediction"]

    def arena_bytes(self, rank: int) -> int:
        return int(self.doc["arena_bytes"][rank])

    def expected_imms(self, rank: int) -> int:
        """Immediates a complete update brings inference rank `rank`."""
        return int(self.doc["expected_imms"][rank])

    def arena(self, rank: int) -> list[ArenaEntry]:
        out = []
        for t, image, off, nbytes, soff, snbytes in self.doc["arenas"][rank]:
            target = self.targets[t]
            boxes = self.doc["images"][image]["boxes"]
            out.append(ArenaEntry(target["name"], off, nbytes, soff, snbytes,
                                  _local_shape(target, boxes), _scale_shape(target, boxes), target["dtype"]))
        return out

    def writes_of(self, trainer: int) -> int:
        return sum(1 for w in self.doc["writes"] if w[1] == trainer)


def _local_shape(target: dict[str, Any], boxes: list[list[list[int]]]) -> tuple[int, ...]:
    shapes = [[h - l for l, h in zip(lo, hi)] for lo, hi in boxes]
    out = list(shapes[0])
    f = target["fuse_dim"]
    for s in shapes[1:]:
        out[f] += s[f]
    return tuple(out)


def _scale_shape(target: dict[str, Any], boxes: list[list[list[int]]]) -> tuple[int, ...]:
    q = target["quant"]
    if q == "none":
        return ()
    shapes = []
    for lo, hi in boxes:
        lo, hi = list(lo), list(hi)
        if q == "block128":
            for d in (len(lo) - 2, len(lo) - 1):
                lo[d], hi[d] = lo[d] // 128, -(-hi[d] // 128)
        else:
            lo, hi = lo[:-1], hi[:-1]
        shapes.append([h - l for l, h in zip(lo, hi)])
    out = list(shapes[0])
    f = target["fuse_dim"]
    for s in shapes[1:]:
        out[f] += s[f]
    return tuple(out)


def plan(input_json: str, *, max_chunk_bytes: int | None = None, num_domains: int = 1,
         nic_bytes_per_s: float = 50e9) -> Schedule:
    """Plans with the C++ planner. Bad metadata raises InvalidArgumentError naming the parameter."""
    cfg: dict[str, Any] = {"num_domains": num_domains, "nic_bytes_per_s": nic_bytes_per_s}
    if max_chunk_bytes is not None:
        cfg["max_chunk_bytes"] = int(max_chunk_bytes)
    return Schedule(_w.plan(input_json, json.dumps(cfg)))


def data_imm(version: int, block: tuple[int, int] | None = None) -> int:
    """The immediate every data write and commit of update `version` carries: the value of
    `block` (a receiver's reserved (first, count), Receiver.imm_block) the trainers were told, or
    without one the fixed value, which other workloads on the engine may use too."""
    if block is None:
        return int(_w.data_imm(version))
    return int(_w.block_data_imm((int(block[0]), int(block[1])), version))


def reserve_update_imms(engine: Any) -> Any:
    """A block of immediates on `engine` for one rank's updates (an ImmReservation; its
    (first, count) goes to the trainers beside the rank's descriptor): what an inference
    Receiver counts, or a trainer's barriers when there are several trainers. Released by
    release() or when collected; OutOfRangeError naming weights when the engine has none free."""
    return _w.reserve_update_imms(engine)


def simulate(schedule: Schedule, nic_bytes_per_s: float, window_bytes: int = 256 << 20) -> dict[str, Any]:
    """The schedule through the fluid NIC model: time_s, group_time_s, bound_s, group_bound_s, ratio."""
    return dict(_w.simulate(schedule.json, nic_bytes_per_s, window_bytes))


def baseline_estimate(input_json: str, schedule: Schedule, nic_bytes_per_s: float) -> dict[str, Any]:
    """The rank-0 gather -> broadcast -> scatter baseline on the same NIC model."""
    return dict(_w.baseline_estimate(input_json, schedule.json, nic_bytes_per_s))
