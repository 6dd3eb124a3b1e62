"""The shape of an adapter for vLLM's weight-transfer engine calls
(vllm/distributed/weight_transfer/base.py: init_transfer_engine, start_weight_update,
update_weights, finish_weight_update, shutdown; trainer_send_weights on the trainer side),
whose RDMA backend upstream still lists as to do. Thin on purpose: vLLM's model runner owns the
weight tensors; here the arena is registered once and the weights are views into it."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .receiver import Receiver
from .schedule import Schedule
from .trainer import Trainer


class FabricWeightTransferEngine:
    """Inference worker side. One-sided: update_weights has nothing to receive."""

    def __init__(self) -> None:
        self.receiver: Receiver | None = None
        self._version = 0

    def init_transfer_engine(self, engine: Any, schedule: Schedule, rank: int) -> bytes:
        """Registers the arena once; returns the descriptor to publish to the trainers."""
        self.receiver = Receiver(engine, schedule, rank)
        return bytes(self.receiver.desc)

    def start_weight_update(self, version: int) -> None:
        assert self.receiver is not None, "init_transfer_engine first"
        self.receiver.expect(version)
        self._version = version

    def update_weights(self, *_args: Any, **_kwargs: Any) -> None:
        """Nothing to do: the trainers write straight into the registered weights."""

    def finish_weight_update(self, timeout: float = 60.0) -> int:
        """Waits for the version started last; returns it, or raises TimeoutError leaving the
        previous complete version reported by complete_version."""
        assert self.receiver is not None
        if not self.receiver.wait(self._version, timeout):
            raise TimeoutError(f"weights version {self._version} incomplete after {timeout} s; "
                               f"complete: {self.receiver.complete_version}")
        return self._version

    def weights(self) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
        assert self.receiver is not None
        return self.receiver.tensors()

    def shutdown(self) -> None:
        self.receiver = None


class TrainerFabricWeightTransferEngine:
    """Trainer side: trainer_send_weights(version, shards) runs one update."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer

    def trainer_send_weights(self, version: int, shards: Mapping[str, np.ndarray]) -> None:
        self.trainer.update(version, shards)
