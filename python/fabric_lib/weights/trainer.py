"""The trainer side: unshard (an all-gather over the mesh group's FSDP dims, as
DTensor.full_tensor() does) and hand each target's views to the C++ executor, which prepares,
posts the WRITEs, and runs the per-group barrier and the commit through the engine."""

from __future__ import annotations

import itertools
import time
from typing import Any, Mapping, Sequence

import numpy as np

from .. import InvalidArgumentError
from .. import _weights as _w
from .metadata import TrainerLayout, local_box, mesh_coords
from .schedule import Schedule

_ITEM = {"bfloat16": np.uint16, "float32": np.float32}


def _blocks(blocks: Sequence[Any]) -> list[tuple[int, int]]:
    return [(int(b[0]), int(b[1])) for b in blocks]


class Trainer:
    """One per trainer rank. `process_group` (torch.distributed, e.g. gloo) spans the trainer
    ranks and is used only to unshard; None when no mesh group unshards anything.

    The immediates are the ranks' own, reserved on their engines (reserve_update_imms) and
    learnt beside their descriptors, so an update counts apart from every other workload:
    `inference_imms`, per inference rank, its Receiver's imm_block; `trainer_imms` (needed with
    more than one trainer), per trainer rank, the (first, count) of the reservation it counts
    barriers in, this rank's own included (the caller keeps that reservation alive)."""

    def __init__(self, engine: Any, schedule: Schedule, layout: TrainerLayout, rank: int,
                 inference_arenas: Sequence[Any], trainer_barriers: Sequence[Any], *,
                 inference_imms: Sequence[tuple[int, int]] | None = None,
                 trainer_imms: Sequence[tuple[int, int]] = (),
                 process_group: Any = None, watermark_bytes: int = 256 << 20, timeout_s: float = 30.0) -> None:
        if inference_imms is None:
            raise InvalidArgumentError(
                "weights Trainer: inference_imms is needed: each inference rank's Receiver.imm_block, "
                "the immediates it counts (one (first, count) per inference rank)")
        self.schedule = schedule
        self.layout = layout
        self.rank = rank
        self.coords = mesh_coords(layout.mesh, rank)
        self.params = {p.name: p for p in layout.params}
        self.group_index = {g.name: i for i, g in enumerate(layout.groups)}
        self.executor = _w.Executor(engine, schedule.json, rank, list(inference_arenas), list(trainer_barriers),
                                    watermark_bytes, timeout_s, _blocks(inference_imms), _blocks(trainer_imms))
        # Whole updates by outcome, their seconds, the last version sent whole (metric_counts()).
        self._updates = {"ok": 0, "failed": 0, "seconds": 0.0, "version": 0}
        self._subgroups: dict[int, tuple[list[int], Any]] = {}
        dims = [n for n, _ in layout.mesh]
        for gi, g in enumerate(layout.groups):
            skip = [d in g.unshard for d in dims]
            if not any(skip):
                continue
            # Every subgroup (ranks agreeing on the kept dims), created in the same order on every rank.
            kept = [range(s) if not skip[i] else [None] for i, (_, s) in enumerate(layout.mesh)]
            world = range(schedule.trainer_ranks)
            for key in itertools.product(*kept):
                members = [r for r in world
                           if all(k is None or mesh_coords(layout.mesh, r)[i] == k for i, k in enumerate(key))]
                pg = None
                if process_group is not None and len(members) > 1:
                    import torch.distributed as dist

                    pg = dist.new_group(members, backend="gloo")
                if self.rank in members:
                    self._subgroups[gi] = (members, pg)

    def _skip(self, group: int) -> list[bool]:
        unshard = self.layout.groups[group].unshard
        return [n in unshard for n, _ in self.layout.mesh]

    def _prepared(self, name: str, local: np.ndarray) -> tuple[Any, list[int], list[int]] | None:
        """(values, lo, hi) of `name` after unshard, or None when this rank does not hold it."""
        p = self.params[name]
        g = self.group_index[p.group]
        own = local_box(p.shape, p.placements, self.layout.mesh, self.coords)
        if own is None:
            return None
        full = local_box(p.shape, p.placements, self.layout.mesh, self.coords, self._skip(g))
        assert full is not None
        if full == own or g not in self._subgroups:
            return np.ascontiguousarray(local).view(np.uint8), own[0], own[1]
        import torch
        import torch.distributed as dist

        members, pg = self._subgroups[g]
        boxes = [local_box(p.shape, p.placements, self.layout.mesh, mesh_coords(self.layout.mesh, r))
                 for r in members]
        item = np.dtype(_ITEM[p.dtype])
        sizes = [int(np.prod([h - l for l, h in zip(*b)])) * item.itemsize for b in boxes]
        longest = max(sizes)
        mine = np.zeros(longest, np.uint8)
        flat = np.ascontiguousarray(local).view(np.uint8).reshape(-1)
        mine[:flat.size] = flat
        bufs = [torch.empty(longest, dtype=torch.uint8) for _ in members]
        dist.all_gather(bufs, torch.from_numpy(mine), group=pg)
        lo, hi = full
        out = np.zeros([h - l for l, h in zip(lo, hi)], item)
        for b, n, buf in zip(boxes, sizes, bufs):
            piece = buf.numpy()[:n].view(item).reshape([h - l for l, h in zip(*b)])
            out[tuple(slice(bl - l, bh - l) for bl, bh, l in zip(b[0], b[1], lo))] = piece
        return out.view(np.uint8), lo, hi

    def update(self, version: int, local: Mapping[str, np.ndarray], *, stop_after_group: int | None = None) -> None:
        """Sends version `version`: `local[name]` is this rank's shard of every parameter it holds
        (bfloat16 as uint16 bits). Raises the engine's error when the update fails on this rank."""
        if stop_after_group is not None:  # a test's partial update: not counted
            self._update(version, local, stop_after_group)
            return
        start = time.perf_counter()
        try:
            self._update(version, local, None)
        except BaseException:
            self._updates["failed"] += 1
            raise
        finally:
            self._updates["seconds"] += time.perf_counter() - start
        self._updates["ok"] += 1
        self._updates["version"] = version

    def _update(self, version: int, local: Mapping[str, np.ndarray], stop_after_group: int | None) -> None:
        ex = self.executor
        ex.begin(version)
        targets = self.schedule.targets
        for g in range(len(self.schedule.group_names)):
            for ti, t in enumerate(targets):
                if t["group"] != g:
                    continue
                views = []
                for src in t["sources"]:
                    if src not in local:
                        continue
                    prepared = self._prepared(src, local[src])
                    if prepared is not None:
                        values, lo, hi = prepared
                        views.append((src, values, self.params[src].dtype, lo, hi))
                if ex.sends(ti):
                    ex.send_target(ti, views)
            if stop_after_group == g:
                return
            ex.finish_group(g)
        ex.commit()

    def stats(self) -> dict[str, Any]:
        return dict(self.executor.stats())

    def metric_counts(self) -> dict[str, float]:
        """What fabric_lib.metrics exports as fabric_weights_* (docs/observability.md): updates
        by outcome and their seconds, the last version sent whole, the executor's totals."""
        s = self.executor.stats()
        return {"updates_ok": self._updates["ok"], "updates_failed": self._updates["failed"],
                "update_seconds": self._updates["seconds"], "version": self._updates["version"],
                "bytes": s["bytes"], "writes": s["writes"], "barrier_wait_seconds": s["barrier_wait_s"]}
