"""The `fabric` backend in vLLM's weight-transfer slot, inference worker side
(vllm/distributed/weight_transfer/base.py's WeightTransferEngine; registered by
fabric_lib.weights.vllm.register, selected with weight_transfer_config={"backend": "fabric"}).

One update, as the worker's calls drive it:
  init_transfer_engine({trainer: [...], provider, timeout_s})  once: map the trainer's
      parameters onto the live model (vllm_layout), plan, register two arenas, bind the direct
      parameters to arena 0. Bad metadata raises here, before anything is registered.
  start_weight_update()                                nothing to prepare (the model keeps serving)
  update_weights({phase: "arm", version, trainer_ranks})  checks the version and the trainer
      ranks, arms the standby arena's count; the caller starts the trainers only after this.
  update_weights({phase: "wait", version, wait_s})     waits (bounded) for every trainer's commit;
      raises on timeout, and vLLM's worker then ends the session: the served version is the
      previous one, whose arena nobody wrote.
  update_weights({phase: "abort", version})            gives the version up (finish then swaps nothing)
  finish_weight_update()                               the swap: direct parameters rebound to the
      standby arena, staged tensors through load_weights (vLLM's layerwise reload), version bumped.
Generation is never paused during the transfer (the trainers write only the standby arena); it
waits only for the swap, which runs between engine steps (collective_rpc)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from vllm.distributed.weight_transfer.base import (
    WeightTransferEngine,
    WeightTransferInitInfo,
    WeightTransferUpdateInfo,
)

from .. import FabricError, FabricTimeoutError, InvalidArgumentError, UnsupportedError
from .metadata import MeshGroup, TrainerLayout, plan_input_json
from .receiver import Receiver
from .schedule import plan
from .vllm_layout import ModelLayout, layout_for, trainer_params


class WeightUpdateError(FabricError):
    """An update that cannot go on (not armed, already armed, aborted)."""


@dataclass
class FabricInitInfo(WeightTransferInitInfo):
    # The trainer's parameters: [{name, shape, dtype, placements, group}], one per parameter,
    # placements over `mesh` (DTensor's, metadata.Shard/Replicate/Only).
    trainer: list = field(default_factory=list)
    mesh: list = field(default_factory=list)  # [[dim name, size], ...] of the trainer ranks
    groups: list = field(default_factory=lambda: [{"name": "all", "unshard": []}])
    provider: str = "tcp"
    max_chunk_bytes: int = 32 << 20


@dataclass
class FabricUpdateInfo(WeightTransferUpdateInfo):
    phase: str = "arm"  # "arm" | "wait" | "abort"
    version: int = 0
    trainer_ranks: list = field(default_factory=list)
    wait_s: float = 60.0


class FabricWeightTransferEngine(WeightTransferEngine[FabricInitInfo, FabricUpdateInfo]):
    init_info_cls = FabricInitInfo
    update_info_cls = FabricUpdateInfo
    supports_draft_weight_update = False

    def __init__(self, config: Any, vllm_config: Any, device: Any, model: Any) -> None:
        super().__init__(config, vllm_config, device, model)
        if self.parallel_config.world_size != 1:
            raise UnsupportedError("the fabric weight-transfer backend serves TP/PP 1 engines only")
        self.engine: Any = None
        self.schedule: Any = None
        self.layout: ModelLayout | None = None
        self.arenas: list[Receiver] = []
        self.serving = 0  # arena the direct parameters are bound to
        self.version = 0  # the version being served (0: the weights vLLM loaded)
        self.highest = 0  # the highest version ever armed: versions never repeat
        self.pending: int | None = None
        self.aborted = False
        self.stats: dict[str, float] = {}

    # ------------------------------------------------------------------ init
    def init_transfer_engine(self, init_info: FabricInitInfo) -> None:
        import fabric_lib as fl

        if self.engine is not None:
            raise WeightUpdateError("the fabric weight-transfer engine is already initialised")
        placements, sources = trainer_params(init_info.trainer)
        layout = layout_for(self.model, placements)  # raises before anything is registered
        mesh = [(str(n), int(s)) for n, s in init_info.mesh]
        groups = [MeshGroup(str(g["name"]), tuple(g.get("unshard", ()))) for g in init_info.groups]
        t0 = time.monotonic()
        schedule = plan(plan_input_json(TrainerLayout(mesh, groups, sources), layout.inference, layout.rules),
                        max_chunk_bytes=int(init_info.max_chunk_bytes))
        self.stats["plan_s"] = time.monotonic() - t0
        engine = fl.Engine(init_info.provider)
        try:
            arenas = [Receiver(engine, schedule, 0) for _ in range(2)]
            self.schedule, self.layout, self.arenas = schedule, layout, arenas
            self._bind_direct(0, copy_current=True)
        except BaseException:
            self.schedule, self.layout, self.arenas = None, None, []
            engine.stop()
            raise
        self.engine = engine

    def _views(self, arena: int) -> dict[str, Any]:
        import torch

        rx = self.arenas[arena]
        buf = torch.from_numpy(rx.arena)
        out = {}
        for e in rx.entries():
            dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[e.dtype]
            out[e.target] = buf[e.offset:e.offset + e.nbytes].view(dtype).view(e.local_shape)
        return out

    def _bind_direct(self, arena: int, copy_current: bool = False) -> None:
        """Points every direct parameter at arena `arena` (zero copy; the first time, the values
        vLLM loaded are copied in so that serving is unchanged)."""
        params = dict(self.model.named_parameters())
        views = self._views(arena)
        assert self.layout is not None
        for name in self.layout.direct:
            if copy_current:
                views[name].copy_(params[name].data)
            params[name].data = views[name]
        self.serving = arena

    def describe(self) -> dict[str, Any]:
        """What the trainers need (schedule, both arenas' descriptors and immediate blocks) and what
        is served."""
        if self.layout is None:
            raise WeightUpdateError("init_transfer_engine first")
        return {
            "schedule": self.schedule.json,
            "arenas": [[bytes(rx.desc)] for rx in self.arenas],
            "imms": [[list(rx.imm_block)] for rx in self.arenas],  # per arena, per inference rank
            "serving": self.serving,
            "standby": 1 - self.serving,
            "version": self.version,
            "pending": self.pending,
            "direct": list(self.layout.direct),
            "staged": dict(self.layout.staged_into),
            "arena_bytes": self.schedule.arena_bytes(0),
            "stats": dict(self.stats),
        }

    # ------------------------------------------------------------------ one update
    def start_weight_update(self) -> None:
        if self.engine is None:
            raise WeightUpdateError("init_transfer_engine first")

    def receive_weights(self, info: FabricUpdateInfo) -> None:
        if self.engine is None:
            raise WeightUpdateError("init_transfer_engine first")
        if info.phase == "arm":
            self._arm(info)
        elif info.phase == "wait":
            self._wait(info)
        elif info.phase == "abort":
            if self.pending == info.version:
                self.aborted = True
        else:
            raise InvalidArgumentError(f"update phase '{info.phase}' (arm, wait or abort)")

    def update_weights(self, update_info: dict[str, Any]) -> None:
        # The base class synchronises an accelerator after receive_weights; nothing to sync here.
        self.receive_weights(self.parse_update_info(update_info))

    def _arm(self, info: FabricUpdateInfo) -> None:
        v = int(info.version)
        if self.pending is not None and not self.aborted:
            raise WeightUpdateError(f"update to version {v} started while version {self.pending} is in progress")
        if v <= self.highest:
            raise InvalidArgumentError(f"version {v} is not newer than version {self.highest} "
                                       f"(serving {self.version}); versions never repeat")
        want = list(range(self.schedule.trainer_ranks))
        got = sorted(int(r) for r in info.trainer_ranks)
        if got != want:
            missing = sorted(set(want) - set(got))
            raise InvalidArgumentError(f"version {v}: trainer ranks {got} take part but the schedule needs "
                                       f"{want}" + (f" (missing {missing})" if missing else ""))
        self.arenas[1 - self.serving].expect(v)
        self.highest = v
        self.pending = v
        self.aborted = False
        self.stats["armed_at"] = time.monotonic()

    def _wait(self, info: FabricUpdateInfo) -> None:
        v = int(info.version)
        if self.pending != v or self.aborted:
            raise WeightUpdateError(f"version {v} is not the armed update (armed: {self.pending})")
        rx = self.arenas[1 - self.serving]
        if not rx.wait(v, float(info.wait_s)):
            self.aborted = True
            raise FabricTimeoutError(f"weights version {v} incomplete after {info.wait_s} s (a trainer rank "
                                     f"missing or failed); still serving version {self.version}")
        self.stats["transfer_s"] = time.monotonic() - self.stats.get("armed_at", time.monotonic())

    def finish_weight_update(self) -> None:
        v, self.pending = self.pending, None
        if v is None or self.aborted:
            self.aborted = False
            return
        standby = 1 - self.serving
        if self.arenas[standby].complete_version < v:
            raise WeightUpdateError(f"finish_weight_update before version {v} arrived (update_weights "
                                    "phase 'wait' first); still serving the previous version")
        t0 = time.monotonic()
        self._load_staged(standby)
        t1 = time.monotonic()
        self._bind_direct(standby)
        self.version = v
        self.stats["load_weights_s"] = t1 - t0
        self.stats["swap_s"] = time.monotonic() - t0

    def _load_staged(self, arena: int) -> None:
        """The staged tensors through vLLM's own loader, in its layerwise reload: each layer is
        loaded, repacked (process_weights_after_loading) and copied into its kernel tensors."""
        from vllm.model_executor.model_loader.reload.layerwise import (
            finalize_layerwise_reload,
            initialize_layerwise_reload,
        )

        assert self.layout is not None
        views = self._views(arena)
        staged = [(name, views[name]) for name in self.layout.staged]
        if not staged:
            return
        direct = dict(self.model.named_parameters())
        keep = {n: direct[n].data for n in self.layout.direct}
        initialize_layerwise_reload(self.model)
        try:
            self.model.load_weights(iter(staged))
        finally:
            finalize_layerwise_reload(self.model, self.model_config)
        # Layers not loaded got their kernel tensors back; make sure the direct ones still point
        # at the serving arena until _bind_direct moves them.
        params = dict(self.model.named_parameters())
        for n, data in keep.items():
            params[n].data = data

    def shutdown(self) -> None:
        engine, self.engine = self.engine, None
        self.arenas = []
        if engine is not None:
            engine.stop()


def describe(worker: Any) -> dict[str, Any]:
    """collective_rpc(describe): the worker's fabric engine state (vLLM's LLM has no method for it)."""
    engine = getattr(worker, "weight_transfer_engine", None)
    if not isinstance(engine, FabricWeightTransferEngine):
        raise WeightUpdateError("this vLLM worker's weight_transfer_config backend is not 'fabric'")
    return engine.describe()


def dumps(info: Any) -> str:
    return json.dumps(info)
