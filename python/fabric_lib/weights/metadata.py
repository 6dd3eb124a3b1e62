"""Parameter metadata for the planner: names, global shapes, dtypes and placements over a
device mesh (DTensor's Shard/Replicate, plus Only for pipeline stages), and the name map."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence


def Shard(dim: int) -> str:  # noqa: N802 - DTensor's spelling
    """The tensor is split along `dim` over this mesh dimension (torch.chunk sizes)."""
    return f"S({int(dim)})"


def Replicate() -> str:  # noqa: N802
    """Every rank along this mesh dimension holds the whole tensor."""
    return "R"


def Only(coord: int) -> str:  # noqa: N802
    """Only the ranks at `coord` of this mesh dimension hold the tensor (a pipeline stage)."""
    return f"O({int(coord)})"


DTYPES = ("bfloat16", "float32", "float8_e4m3fn")
QUANTS = ("none", "block128", "per_channel")


@dataclass
class SourceParam:
    name: str
    shape: Sequence[int]
    dtype: str
    placements: Sequence[str]
    group: str


@dataclass
class TargetParam:
    name: str
    shape: Sequence[int]
    dtype: str
    placements: Sequence[str]
    quant: str = "none"


@dataclass
class NameRule:
    """target = sources (each transposed if asked), concatenated along fuse_dim."""

    target: str
    sources: Sequence[str]
    fuse_dim: int = 0
    transpose: bool = False


@dataclass
class MeshGroup:
    name: str
    unshard: Sequence[str] = ()  # mesh dims that prepare reconstructs (FSDP)


@dataclass
class TrainerLayout:
    mesh: Sequence[tuple[str, int]]
    groups: Sequence[MeshGroup]
    params: list[SourceParam] = field(default_factory=list)


@dataclass
class InferenceLayout:
    mesh: Sequence[tuple[str, int]]
    params: list[TargetParam] = field(default_factory=list)


def plan_input_json(trainer: TrainerLayout, inference: InferenceLayout, rules: Sequence[NameRule]) -> str:
    """The planner's input (the C++ parse_plan_input format)."""
    doc: dict[str, Any] = {
        "trainer": {
            "mesh": [[n, int(s)] for n, s in trainer.mesh],
            "groups": [{"name": g.name, "unshard": list(g.unshard)} for g in trainer.groups],
            "params": [
                {"name": p.name, "shape": [int(x) for x in p.shape], "dtype": p.dtype,
                 "placements": list(p.placements), "group": p.group}
                for p in trainer.params
            ],
        },
        "inference": {
            "mesh": [[n, int(s)] for n, s in inference.mesh],
            "params": [
                {"name": p.name, "shape": [int(x) for x in p.shape], "dtype": p.dtype,
                 "placements": list(p.placements), "quant": p.quant}
                for p in inference.params
            ],
        },
        "rules": [
            {"target": r.target, "sources": list(r.sources), "fuse_dim": r.fuse_dim, "transpose": r.transpose}
            for r in rules
        ],
    }
    return json.dumps(doc)


def mesh_coords(mesh: Sequence[tuple[str, int]], rank: int) -> list[int]:
    coords = [0] * len(mesh)
    for i in reversed(range(len(mesh))):
        coords[i] = rank % mesh[i][1]
        rank //= mesh[i][1]
    return coords


def local_box(shape: Sequence[int], placements: Sequence[str], mesh: Sequence[tuple[str, int]],
              coords: Sequence[int], skip: Sequence[bool] = ()) -> tuple[list[int], list[int]] | None:
    """[lo, hi) of what the rank at `coords` holds, or None (an Only placement excludes it).
    Mirrors the C++ local_box: Shard placements refine in mesh-dim order, torch.chunk sizes."""
    lo = [0] * len(shape)
    hi = [int(x) for x in shape]
    for d, p in enumerate(placements):
        if p.startswith("O("):
            if coords[d] != int(p[2:-1]):
                return None
            continue
        if not p.startswith("S(") or (d < len(skip) and skip[d]):
            continue
        dim = int(p[2:-1])
        n = hi[dim] - lo[dim]
        k = mesh[d][1]
        c = -(-n // k)
        base = lo[dim]
        lo[dim] = base + min(coords[d] * c, n)
        hi[dim] = base + min((coords[d] + 1) * c, n)
    return lo, hi


def placements_from_dtensor(dtensor: Any) -> tuple[list[str], list[int]]:
    """(placements, global shape) of a torch DTensor, where torch has DTensor (2.x)."""
    out = []
    for p in dtensor.placements:
        if p.is_shard():
            out.append(Shard(p.dim))
        elif p.is_replicate():
            out.append(Replicate())
        else:
            raise ValueError(f"placement {p!r} (partial) cannot be sent as weights")
    return out, list(dtensor.shape)
