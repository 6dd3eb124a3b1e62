"""fabric_lib.weights: RL weight transfer from trainer ranks straight into inference ranks'
registered weights on a static schedule (docs/weights.md)."""

from .metadata import (
    InferenceLayout,
    MeshGroup,
    NameRule,
    Only,
    Replicate,
    Shard,
    SourceParam,
    TargetParam,
    TrainerLayout,
    local_box,
    mesh_coords,
    plan_input_json,
    placements_from_dtensor,
)
from .receiver import Receiver
from .schedule import ArenaEntry, Schedule, baseline_estimate, data_imm, plan, reserve_update_imms, simulate
from .trainer import Trainer

__all__ = [
    "ArenaEntry", "InferenceLayout", "MeshGroup", "NameRule", "Only", "Receiver", "Replicate", "Schedule",
    "Shard", "SourceParam", "TargetParam", "Trainer", "TrainerLayout", "data_imm", "local_box", "mesh_coords",
    "baseline_estimate", "placements_from_dtensor", "plan", "plan_input_json", "reserve_update_imms", "simulate",
]
