"""fabric_lib.kv: KV-cache transfer for disaggregated prefill/decode (docs/kv.md).

A Sender (prefill rank) and a Receiver (decode rank) each own an engine. The receiver connects to
the prefill ranks, asks them for a request's KV with its page list, and polls the request's state;
the sender offers each request's pages and calls layer_done as each layer's compute finishes.
"""

from __future__ import annotations

from typing import Any, Sequence

# The parent package loaded libfabric first and put the interpreter's signal handlers back.
from .._kv import (
    EngineOptions,
    Layout,
    fused_hnd,
    heads_first,
    mla_layout,
    receivers_per_source,
    shard_heads,
    vllm_cpu,
    vllm_hnd,
    vllm_nhd,
)
from .._kv import Receiver as _Receiver
from .._kv import Sender as _Sender

TERMINAL = ("done", "failed", "cancelled")


def _region(obj: Any) -> tuple[int, int, int]:
    """(pointer, bytes, CUDA ordinal or -1) of a contiguous torch tensor or numpy array: a CUDA
    tensor registers as device memory of its GPU (the engine routes it to that GPU's NICs,
    docs/topology.md), anything else as host memory."""
    if hasattr(obj, "data_ptr"):
        if not obj.is_contiguous():
            raise ValueError("KV regions must be contiguous tensors")
        device = getattr(obj, "device", None)
        ordinal = -1
        if device is not None and getattr(device, "type", "cpu") == "cuda":
            ordinal = device.index if device.index is not None else 0
        return int(obj.data_ptr()), int(obj.numel() * obj.element_size()), ordinal
    iface = obj.__array_interface__
    return int(iface["data"][0]), int(obj.nbytes), -1


def _options(provider: str, bind_address: str, request_timeout_ms: int,
             thread_cpus: str) -> EngineOptions:
    o = EngineOptions()
    o.provider = provider
    o.bind_address = bind_address
    o.request_timeout_ms = request_timeout_ms
    # cpulist ("2-3") for the engine's threads; "": FABRIC_CPUS, else the process's CPUs
    # (docs/concepts.md, "Threads and CPUs"), never the creating thread's pin.
    o.thread_cpus = thread_cpus
    return o


class Sender(_Sender):
    """The prefill side. regions: one tensor/array per layout region (kept alive here)."""

    def __init__(
        self,
        layout: Layout,
        regions: Sequence[Any],
        *,
        tail: Any = None,
        provider: str = "tcp",
        bind_address: str = "127.0.0.1",
        request_timeout_ms: int = 5000,
        heartbeat_ms: int = 1000,
        receiver_timeout_ms: int = 30000,
        thread_cpus: str = "",
    ) -> None:
        self._keep = (list(regions), tail)
        super().__init__(
            layout,
            [_region(r) for r in regions],
            None if tail is None else _region(tail),
            _options(provider, bind_address, request_timeout_ms, thread_cpus),
            heartbeat_ms,
            receiver_timeout_ms,
        )


class Receiver(_Receiver):
    """The decode side. regions: the layout's regions, then any tail buffers (kept alive here)."""

    def __init__(
        self,
        layout: Layout,
        regions: Sequence[Any],
        *,
        spread: int = 0,
        provider: str = "tcp",
        bind_address: str = "127.0.0.1",
        request_timeout_ms: int = 5000,
        heartbeat_ms: int = 1000,
        quarantine_ms: int = 30000,
        thread_cpus: str = "",
    ) -> None:
        self._keep = list(regions)
        super().__init__(
            layout,
            [_region(r) for r in regions],
            _options(provider, bind_address, request_timeout_ms, thread_cpus),
            spread,
            heartbeat_ms,
            quarantine_ms,
        )


__all__ = [
    "TERMINAL",
    "Layout",
    "Receiver",
    "Sender",
    "fused_hnd",
    "heads_first",
    "mla_layout",
    "receivers_per_source",
    "shard_heads",
    "vllm_cpu",
    "vllm_hnd",
    "vllm_nhd",
]
