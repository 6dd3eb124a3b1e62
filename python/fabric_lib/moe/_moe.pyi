"""One rank of a MoE dispatch/combine group on the host device (docs/moe.md)."""

# The binding fabric_lib.moe.Buffer wraps (python/src/moe/module.cpp). Docstrings repeat the
# binding's; python/tests/test_stubs.py checks that they match and that this file and the module
# name the same things with the same parameters.

from typing import Callable

from typing_extensions import Buffer

from .._native import Engine

class Group:
    """One rank's MoE group on its engine (fabric_lib.moe.Buffer wraps it)."""

    def __init__(
        self,
        rank: int,
        world_size: int,
        num_experts: int,
        hidden: int,
        max_tokens_per_rank: int,
        top_k: int,
        all_gather: Callable[[bytes], list[bytes]],
        provider: str = "shm",
        dispatch_element_bytes: int = 2,
        num_scales: int = 0,
        combine_input: str = "bf16",
        combine_output: str = "f32",
        max_private_tokens: int = 16,
        dp_size: int = 1,
        node_size: int = 1,
        expert_alignment: int = 1,
        timeout_ms: int = 10000,
        host_threads: int = 1,
        request_timeout_ms: int = 5000,
        record_post_timings: bool = False,
        busy_poll: bool = False,
        bind_address: str = "127.0.0.1",
        proxy: str = "inline",
        idle_spin_us: int = ...,
        idle_yield_us: int = ...,
        idle_sleep_us: int = ...,
        engine: Engine | None = None,
    ) -> None: ...
    def dispatch_send(self, x: Buffer, scales: Buffer, topk_idx: Buffer, tokens: int) -> None: ...
    def dispatch_recv(self, recv_x: Buffer, recv_scales: Buffer, recv_count: Buffer) -> None: ...
    def combine_send(self, x: Buffer) -> None: ...
    def combine_recv(self, topk_weights: Buffer, out: Buffer) -> None: ...
    def quiesce(self) -> None: ...
    def wait_idle(self) -> None: ...
    def outstanding_requests(self) -> int: ...
    def close(self) -> None: ...
    def layout(self) -> dict[str, int]: ...
    def stats(self) -> dict[str, int]: ...
    def timeline(self) -> dict[str, int]: ...
    def post_timings(self) -> list[dict[str, int]]: ...
    def expert_begin(self) -> list[int]: ...
    def broken_ranks(self) -> list[int]: ...
    @property
    def epoch(self) -> int: ...
