"""fabric_lib.kv: KV-cache transfer for disaggregated prefill/decode (docs/kv.md).

A Sender (prefill rank) and a Receiver (decode rank) each run on an engine: the process's
fabric_lib.Engine when given one (engine=), which its other workloads (weights, MoE) share, or an
engine of their own made from provider, bind_address, request_timeout_ms and thread_cpus. The
receiver connects to the prefill ranks, asks them for a request's KV with its page list, and polls
the request's state; the sender offers each request's pages and calls layer_done as each layer's
compute finishes.
"""

from __future__ import annotations

from typing import Any, Sequence

# The parent package loaded libfabric first and put the interpreter's signal handlers back.
from .. import Engine, InvalidArgumentError
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


def _options(who: str, engine: Engine | None, provider: str | None, bind_address: str | None,
             request_timeout_ms: int | None, thread_cpus: str | None) -> EngineOptions:
    """The options of the engine a Sender or Receiver makes for itself; with engine= given, none
    may be set (they would silently not apply to an engine that already exists)."""
    given = {"provider": provider, "bind_address": bind_address,
             "request_timeout_ms": request_timeout_ms, "thread_cpus": thread_cpus}
    if engine is not None:
        if not isinstance(engine, Engine):
            raise InvalidArgumentError(f"kv {who}: engine= takes a fabric_lib.Engine, not "
                                       f"{type(engine).__name__}")
        clash = sorted(k for k, v in given.items() if v is not None)
        if clash:
            raise InvalidArgumentError(
                f"kv {who}: engine= was given, so {', '.join(clash)} cannot be: they configure the "
                f"engine a {who} makes for itself (set them on the fabric_lib.Engine instead)")
    o = EngineOptions()
    o.provider = "tcp" if provider is None else provider
    o.bind_address = "127.0.0.1" if bind_address is None else bind_address
    o.request_timeout_ms = 5000 if request_timeout_ms is None else request_timeout_ms
    # cpulist ("2-3") for the engine's threads; "": FABRIC_CPUS, else the process's CPUs
    # (docs/concepts.md, "Threads and CPUs"), never the creating thread's pin.
    o.thread_cpus = "" if thread_cpus is None else thread_cpus
    return o


class Sender(_Sender):
    """The prefill side. regions: one per layout region, each what Engine.reg_mr takes (a writable
    C-contiguous buffer such as a numpy array, a contiguous torch tensor, a CUDA one as memory of
    its GPU) or a (ptr, length[, device]) tuple; kept alive and registered on the engine until
    close(), and refused with Engine.reg_mr's errors. tail: one more such region. engine: the process's fabric_lib.Engine (kept alive here), else
    one of its own from provider (default "tcp"), bind_address ("127.0.0.1"),
    request_timeout_ms (5000) and thread_cpus ("")."""

    def __init__(
        self,
        layout: Layout,
        regions: Sequence[Any],
        *,
        engine: Engine | None = None,
        tail: Any = None,
        provider: str | None = None,
        bind_address: str | None = None,
        request_timeout_ms: int | None = None,
        heartbeat_ms: int = 1000,
        receiver_timeout_ms: int = 30000,
        thread_cpus: str | None = None,
    ) -> None:
        options = _options("Sender", engine, provider, bind_address, request_timeout_ms, thread_cpus)
        super().__init__(
            layout,
            list(regions),
            tail,
            options,
            heartbeat_ms,
            receiver_timeout_ms,
            engine,
        )


class Receiver(_Receiver):
    """The decode side. regions: the layout's regions, then any tail buffers, each as Sender's
    regions, kept alive and registered on the engine until close(). engine: as Sender's."""

    def __init__(
        self,
        layout: Layout,
        regions: Sequence[Any],
        *,
        engine: Engine | None = None,
        spread: int = 0,
        provider: str | None = None,
        bind_address: str | None = None,
        request_timeout_ms: int | None = None,
        heartbeat_ms: int = 1000,
        quarantine_ms: int = 30000,
        thread_cpus: str | None = None,
    ) -> None:
        options = _options("Receiver", engine, provider, bind_address, request_timeout_ms, thread_cpus)
        super().__init__(
            layout,
            list(regions),
            options,
            spread,
            heartbeat_ms,
            quarantine_ms,
            engine,
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
