"""Native binding of fabric-lib's KV module; import fabric_lib.kv instead."""

# The binding fabric_lib.kv wraps (python/src/kv_module.cpp). Docstrings repeat the binding's;
# python/tests/test_stubs.py checks that they match and that this file and the module name the
# same things with the same parameters.

from typing import Protocol, Sequence, Union

from typing_extensions import Buffer

from ._native import Engine

class _Tensor(Protocol):
    """What the resolver reads of a torch tensor (python/src/memory.cpp)."""

    @property
    def device(self) -> object: ...
    def data_ptr(self) -> int: ...
    def is_contiguous(self) -> bool: ...
    def numel(self) -> int: ...
    def element_size(self) -> int: ...

# What Engine.reg_mr takes, and a (ptr, length[, device]) tuple for memory Python does not own.
_Region = Union[Buffer, _Tensor, tuple[int, int], tuple[int, int, Union[str, int, None]]]

class Layout:
    """Where one instance's KV cache lives (docs/kv.md#layout)."""

    def __init__(self) -> None: ...
    kind: int
    num_layers: int
    num_pages: int
    tokens_per_page: int
    total_kv_heads: int
    head_begin: int
    num_heads: int
    head_size: int
    elem_bytes: int
    page_stride: int
    head_stride: int
    token_stride: int
    num_regions: int
    bases: list[tuple[int, int]]
    @property
    def parts(self) -> int: ...
    @property
    def entry_bytes(self) -> int: ...
    @property
    def span_bytes(self) -> int: ...
    def validate(self) -> None: ...
    def fingerprint(self) -> int: ...
    def offset(self, layer: int, part: int, page: int, head: int, token: int) -> int: ...

class EngineOptions:
    """The engine a Sender or Receiver makes for itself when given none."""

    def __init__(self) -> None: ...
    provider: str
    bind_address: str
    request_timeout_ms: int
    max_message_size: int
    thread_cpus: str

class Sender:
    """The prefill side (fabric::kv::Sender), on the given fabric_lib.Engine or its own."""

    def __init__(
        self,
        layout: Layout,
        regions: Sequence[_Region],
        tail: _Region | None,
        options: EngineOptions,
        heartbeat_ms: int,
        receiver_timeout_ms: int,
        engine: Engine | None = None,
    ) -> None: ...
    @property
    def address(self) -> bytes: ...
    def prepare(
        self,
        id: str,
        pages: Sequence[int],
        num_tokens: int,
        receivers: int = 1,
        tail_offset: int | None = None,
    ) -> None: ...
    def layer_done(self, id: str, layer: int, tokens: tuple[int, int] | None = None) -> None: ...
    def add_pages(self, id: str, pages: Sequence[int]) -> None: ...
    def cancel(self, id: str) -> None: ...
    def poll(self, id: str) -> tuple[str, str | None]: ...
    def release(self, id: str) -> None: ...
    def active_requests(self) -> int: ...
    def close(self) -> None: ...

class Receiver:
    """The decode side (fabric::kv::Receiver), on the given fabric_lib.Engine or its own."""

    def __init__(
        self,
        layout: Layout,
        regions: Sequence[_Region],
        options: EngineOptions,
        spread: int,
        heartbeat_ms: int,
        quarantine_ms: int,
        engine: Engine | None = None,
    ) -> None: ...
    @property
    def address(self) -> bytes: ...
    def connect(self, address: bytes, timeout: float = 30.0) -> int: ...
    def source_layout(self, source: int) -> Layout: ...
    def request(
        self,
        id: str,
        pages: Sequence[int],
        num_tokens: int,
        sources: Sequence[int],
        tail: tuple[int, int, int] | None = None,
        src_first: int = 0,
    ) -> int: ...
    def decline(self, id: str, sources: Sequence[int]) -> None: ...
    def cancel(self, id: str) -> None: ...
    def poll(self, id: str) -> tuple[str, str | None]: ...
    def wait(self, id: str, timeout: float) -> tuple[str, str | None]: ...
    def release(self, id: str) -> None: ...
    def active_requests(self) -> int: ...
    def close(self) -> None: ...

def vllm_nhd(
    num_layers: int,
    num_pages: int,
    tokens_per_page: int,
    total_kv_heads: int,
    head_begin: int,
    num_heads: int,
    head_size: int,
    elem_bytes: int,
) -> Layout:
    """(num_layers, num_pages, tokens_per_page, total_kv_heads, head_begin, num_heads, head_size, elem_bytes), one region per layer"""

def vllm_hnd(
    num_layers: int,
    num_pages: int,
    tokens_per_page: int,
    total_kv_heads: int,
    head_begin: int,
    num_heads: int,
    head_size: int,
    elem_bytes: int,
) -> Layout:
    """(num_layers, num_pages, tokens_per_page, total_kv_heads, head_begin, num_heads, head_size, elem_bytes), one region per layer"""

def vllm_cpu(
    num_layers: int,
    num_pages: int,
    tokens_per_page: int,
    total_kv_heads: int,
    head_begin: int,
    num_heads: int,
    head_size: int,
    elem_bytes: int,
) -> Layout:
    """(num_layers, num_pages, tokens_per_page, total_kv_heads, head_begin, num_heads, head_size, elem_bytes), one region per layer"""

def fused_hnd(
    num_layers: int,
    num_pages: int,
    tokens_per_page: int,
    total_kv_heads: int,
    head_begin: int,
    num_heads: int,
    head_size: int,
    elem_bytes: int,
) -> Layout:
    """(num_layers, num_pages, tokens_per_page, total_kv_heads, head_begin, num_heads, head_size, elem_bytes), one region per layer"""

def heads_first(
    num_layers: int,
    num_pages: int,
    tokens_per_page: int,
    total_kv_heads: int,
    head_begin: int,
    num_heads: int,
    head_size: int,
    elem_bytes: int,
) -> Layout:
    """(num_layers, num_pages, tokens_per_page, total_kv_heads, head_begin, num_heads, head_size, elem_bytes), one region per layer"""

def mla_layout(
    num_layers: int, num_pages: int, tokens_per_page: int, latent: int, elem_bytes: int
) -> Layout: ...
def shard_heads(total_kv_heads: int, tp_size: int, rank: int) -> tuple[int, int]: ...
def receivers_per_source(
    sources: Sequence[tuple[int, int]], destinations: Sequence[tuple[int, int]]
) -> list[int]: ...
