"""RL weight transfer: planner, simulator, executor (docs/weights.md)."""

# The binding fabric_lib.weights wraps (python/src/weights.cpp). Docstrings repeat the binding's;
# python/tests/test_stubs.py checks that they match and that this file and the module name the
# same things with the same parameters.

from typing import Sequence

from typing_extensions import Buffer

from ._native import Engine, ImmReservation, MrDesc

# (name, buffer, dtype, lo, hi): a rank's values of region [lo, hi) of one tensor.
_View = tuple[str, Buffer, str, Sequence[int], Sequence[int]]

UPDATE_IMMS: int

class Executor:
    """The trainer side of updates (docs/weights.md)."""

    def __init__(
        self,
        engine: Engine,
        schedule_json: str,
        rank: int,
        inference_arenas: Sequence[MrDesc],
        trainer_barriers: Sequence[MrDesc],
        watermark_bytes: int = 268435456,
        timeout_s: float = 30.0,
        inference_imms: Sequence[tuple[int, int]] = ...,
        trainer_imms: Sequence[tuple[int, int]] = ...,
    ) -> None: ...
    def sends(self, target: int) -> bool: ...
    def begin(self, version: int) -> None: ...
    def send_target(self, target: int, views: list[_View]) -> None: ...
    def finish_group(self, group: int) -> None: ...
    def commit(self) -> None: ...
    def stats(self) -> dict[str, float]: ...

def plan(input_json: str, config_json: str = "") -> str:
    """Plans a schedule from metadata JSON; returns the schedule JSON. Raises InvalidArgumentError naming the parameter for bad metadata."""

def simulate(
    schedule_json: str, nic_bytes_per_s: float, window_bytes: int = 268435456
) -> dict[str, float]:
    """Runs the schedule through the fluid NIC model."""

def baseline_estimate(
    input_json: str, schedule_json: str, nic_bytes_per_s: float
) -> dict[str, float]:
    """The rank-0 gather/broadcast/scatter baseline on the same NIC model."""

def prepare_images(schedule_json: str, views: list[_View]) -> list[bytes]:
    """Every image of the schedule (data then scales) from whole-tensor views (the rank-0 baseline)."""

def data_imm(version: int) -> int: ...
def barrier_imm(version: int, group: int) -> int: ...
def block_data_imm(block: tuple[int, int], version: int) -> int: ...
def block_barrier_imm(block: tuple[int, int], version: int, group: int) -> int: ...
def reserve_update_imms(engine: Engine) -> ImmReservation:
    """UPDATE_IMMS immediate values on `engine` for one rank's updates (owner "weights#<n>"); OutOfRangeError naming weights when none are free."""
