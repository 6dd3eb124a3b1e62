"""The `fabric` backend's trainer side (vLLM's TrainerWeightTransferEngine shape: trainer_init,
send_weights, shutdown), one per trainer rank. Every rank writes its own shards into the
inference engine's standby arena; no rank gathers, and none is special: the controller (an RL
framework's driver, through Ray handles) arms the engine, then calls send_weights on every rank.

Unlike vLLM's rank-0-centric engines, send_weights takes the version and the arena to write:
the engine says which arena is standby when it arms (describe()["standby"])."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Self

import numpy as np
from vllm.distributed.weight_transfer.base import TrainerInitInfo, TrainerWeightTransferEngine

from .. import InvalidArgumentError
from .metadata import MeshGroup, SourceParam, TrainerLayout
from .schedule import Schedule
from .trainer import Trainer


@dataclass
class FabricTrainerInitInfo(TrainerInitInfo):
    backend: ClassVar[str] = "fabric"
    engine: Any = None  # this rank's fabric_lib.Engine
    schedule: str = ""  # the engine's describe()["schedule"]
    arenas: list = field(default_factory=list)  # describe()["arenas"]: per arena, per inference rank
    imms: list = field(default_factory=list)  # describe()["imms"]: (first, count) as arenas
    barriers: list = field(default_factory=list)  # every trainer rank's barrier MrDesc bytes
    # Every trainer rank's (first, count) of its reserve_update_imms, where it counts barriers
    # (needed with more than one trainer rank); this rank's reservation is kept by the caller.
    barrier_imms: list = field(default_factory=list)
    trainer: list = field(default_factory=list)  # the same parameter list the engine was given
    mesh: list = field(default_factory=list)
    groups: list = field(default_factory=lambda: [{"name": "all", "unshard": []}])
    timeout_s: float = 10.0
    watermark_bytes: int = 64 << 20


class FabricTrainerWeightTransferEngine(TrainerWeightTransferEngine[FabricTrainerInitInfo]):
    init_info_cls = FabricTrainerInitInfo

    def __init__(self, trainers: list[Trainer], *, client: Any = None) -> None:
        super().__init__(client=client, source=None, is_sender=True)
        self.trainers = trainers  # one executor per arena

    @classmethod
    def trainer_init(cls, init_info: FabricTrainerInitInfo, *, client: Any = None, source: Any = None) -> Self:
        import fabric_lib as fl

        schedule = Schedule(init_info.schedule)
        if len(init_info.barriers) != schedule.trainer_ranks:
            raise InvalidArgumentError(f"{len(init_info.barriers)} trainer barrier descriptors for the "
                                       f"schedule's {schedule.trainer_ranks} trainer ranks")
        params = [SourceParam(d["name"], list(d["shape"]), d["dtype"], list(d["placements"]), d["group"])
                  for d in init_info.trainer]
        layout = TrainerLayout([(str(n), int(s)) for n, s in init_info.mesh],
                               [MeshGroup(g["name"], tuple(g.get("unshard", ()))) for g in init_info.groups],
                               params)
        if len(init_info.imms) != len(init_info.arenas):
            raise InvalidArgumentError(f"{len(init_info.imms)} immediate block lists for "
                                       f"{len(init_info.arenas)} arenas (describe()['imms'])")
        barriers = [fl.MrDesc.from_bytes(b) for b in init_info.barriers]
        trainers = [Trainer(init_info.engine, schedule, layout, init_info.rank,
                            [fl.MrDesc.from_bytes(d) for d in arena], barriers, inference_imms=imms,
                            trainer_imms=init_info.barrier_imms, watermark_bytes=init_info.watermark_bytes,
                            timeout_s=init_info.timeout_s)
                    for arena, imms in zip(init_info.arenas, init_info.imms)]
        return cls(trainers, client=client)

    def send_weights(self, version: int, arena: int, shards: Mapping[str, np.ndarray],  # type: ignore[override]
                     *, stop_after_group: int | None = None) -> dict[str, Any]:
        """Writes this rank's shards of version `version` into arena `arena`, then the barrier and
        the commit; raises the engine's FabricError when this rank's part fails."""
        t = self.trainers[arena]
        t.update(version, shards, stop_after_group=stop_after_group)
        return t.stats()

    def shutdown(self) -> None:
        self.trainers = []
