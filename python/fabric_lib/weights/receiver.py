"""The inference side: one registered arena and one block of immediates reserved on the engine,
published once (desc and imm_block go to the trainers); no receive code. A version is complete
when its one immediate count is reached: every data write into this rank landed and every
trainer committed, which it does only after all trainers finished all their writes. The block
keeps the count apart from every other workload on the engine (KV, MoE, another Receiver)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .schedule import ArenaEntry, Schedule, data_imm, reserve_update_imms

_NUMPY = {"bfloat16": np.uint16, "float32": np.float32, "float8_e4m3fn": np.uint8}


class Receiver:
    def __init__(self, engine: Any, schedule: Schedule, rank: int) -> None:
        self.engine = engine
        self.schedule = schedule
        self.rank = rank
        self.arena = np.zeros(schedule.arena_bytes(rank), np.uint8)
        self.imms = reserve_update_imms(engine)
        self.handle, self.desc = engine.reg_mr(self.arena)
        self._cond = threading.Condition()
        self._complete = 0
        self._expected = schedule.expected_imms(rank)

    @property
    def imm_block(self) -> tuple[int, int]:
        """(first, count) of this rank's immediates: the trainers' inference_imms entry for it."""
        return int(self.imms.first), int(self.imms.count)

    def close(self) -> None:
        """Gives the arena's registration and the immediates back to the engine (which the
        process's other workloads keep using). Idempotent."""
        if self.imms.count:
            if not self.engine.stopped:
                self.engine.dereg_mr(self.handle)
            self.imms.release()

    @property
    def complete_version(self) -> int:
        """The newest version that arrived whole (0 before the first)."""
        with self._cond:
            return self._complete

    def expect(self, version: int) -> None:
        """Arms the count of `version` (arrivals before this call count too)."""

        def reached(_imm: int, _count: int) -> None:
            with self._cond:
                self._complete = max(self._complete, version)
                self._cond.notify_all()

        self.engine.expect_imm_count(data_imm(version, self.imm_block), self._expected, reached)

    def wait(self, version: int, timeout: float) -> bool:
        """True once `version` is complete; False when `timeout` seconds pass first."""
        with self._cond:
            return self._cond.wait_for(lambda: self._complete >= version, timeout)

    def metric_counts(self) -> dict[str, float]:
        """What fabric_lib.metrics exports as fabric_weights_complete_version."""
        return {"complete_version": self.complete_version}

    def entries(self) -> list[ArenaEntry]:
        return self.schedule.arena(self.rank)

    def tensors(self) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
        """name -> (weights, scales or None): numpy views into the arena, in the local shape.
        bfloat16 is shown as uint16 and float8_e4m3fn as uint8 (their bits)."""
        out = {}
        for e in self.entries():
            data = self.arena[e.offset:e.offset + e.nbytes].view(_NUMPY[e.dtype]).reshape(e.local_shape)
            scales = None
            if e.scale_nbytes:
                scales = self.arena[e.scale_offset:e.scale_offset + e.scale_nbytes].view(np.float32)
                scales = scales.reshape(e.scale_shape)
            out[e.target] = (data, scales)
        return out
