"""Buffer: one rank's dispatch/combine, on host tensors (torch CPU tensors or numpy arrays)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from .. import Engine, InvalidArgumentError
from . import _moe
from ._store import store_all_gather

try:  # torch is optional: numpy arrays work the same
    import torch
except ImportError:  # pragma: no cover - exercised where torch is absent
    torch = None


def _is_torch(a: Any) -> bool:
    return torch is not None and isinstance(a, torch.Tensor)


def _raw(a: Any, dtype: Any = None) -> np.ndarray:
    """A C-contiguous numpy view of a host tensor or array (bfloat16 as its 16-bit pattern)."""
    if _is_torch(a):
        if a.device.type != "cpu":
            raise InvalidArgumentError("fabric_lib.moe works on host tensors; this one is on " + str(a.device))
        a = a.detach().contiguous()
        if a.dtype == torch.bfloat16:
            return a.view(torch.int16).numpy()
        if str(a.dtype).startswith("torch.float8"):
            return a.view(torch.uint8).numpy()
        a = a.numpy()
    a = np.ascontiguousarray(a)
    return a if dtype is None else np.ascontiguousarray(a, dtype=dtype)


# What each element type of the Buffer accepts: torch dtype names, numpy dtypes (bf16 as its
# 16-bit pattern).
_X_DTYPES = {
    "bf16": ({"torch.bfloat16"}, {np.dtype(np.uint16), np.dtype(np.int16)}),
    "f32": ({"torch.float32"}, {np.dtype(np.float32)}),
    "fp8": ({"torch.float8_e4m3fn", "torch.float8_e5m2", "torch.uint8"}, {np.dtype(np.uint8)}),
    "u8": ({"torch.uint8"}, {np.dtype(np.uint8)}),
}


def _check_tensor(name: str, a: Any, dtypes: tuple, hidden: int, rows: int = 0,
                  exact_rows: bool = False, contiguous: bool = False) -> None:
    """a is [n, hidden] of an accepted dtype (n >= rows, or == rows): else InvalidArgumentError."""
    if _is_torch(a):
        dtype, ok = str(a.dtype), str(a.dtype) in dtypes[0]
        is_contiguous = a.is_contiguous()
    else:
        a = np.asarray(a)
        dtype, ok = str(a.dtype), a.dtype in dtypes[1]
        is_contiguous = a.flags.c_contiguous
    if not ok:
        want = sorted(dtypes[0]) + sorted(str(d) for d in dtypes[1])
        raise InvalidArgumentError(f"moe: {name} is {dtype}, this Buffer takes {' or '.join(want)}")
    shape = tuple(a.shape)
    if len(shape) != 2 or shape[1] != hidden:
        raise InvalidArgumentError(
            f"moe: {name} is {list(shape)}, [n, {hidden}] needed (this Buffer's hidden is {hidden})")
    if (shape[0] != rows) if exact_rows else (shape[0] < rows):
        raise InvalidArgumentError(
            f"moe: {name} has {shape[0]} rows, {'' if exact_rows else 'at least '}{rows} needed")
    if contiguous and not is_contiguous:
        raise InvalidArgumentError(f"moe: {name} must be contiguous (it is written in place)")


def _check_same_shape(all_gather: Callable[[bytes], list[bytes]], rank: int, shape: dict) -> None:
    """Every rank passed the same shape: else each raises, naming the field and the ranks.

    The group's own check (a config fingerprint) can only say that configs differ; this round
    says which value, so a rank built with another hidden size is found at once.
    """
    theirs = [json.loads(b) for b in all_gather(json.dumps(shape, sort_keys=True).encode())]
    for field_name, value in shape.items():
        differ = [r for r, t in enumerate(theirs) if t.get(field_name) != value]
        if differ:
            values = ", ".join(f"rank {r}: {theirs[r].get(field_name)}" for r in differ)
            raise InvalidArgumentError(
                f"moe Buffer: {field_name} differs between ranks (rank {rank}: {value}; {values})")


@dataclass
class Handle:
    """What combine needs from a dispatch: the token count, the grouped layout, the weights."""

    tokens: int
    recv_count: np.ndarray
    expert_begin: list[int]
    topk_weights: Optional[np.ndarray] = None
    epoch: int = 0
    torch_output: bool = False
    _done: list[bool] = field(default_factory=lambda: [False])


class Buffer:
    """One rank of an expert-parallel group (the engine, registered arena and proxy inside).

    Collective: every rank builds its Buffer with the same arguments but `rank`, and a shared
    `store` (torch.distributed.TCPStore or anything with set/get) or an `all_gather(blob)`.
    Experts are spread in contiguous blocks (rank r hosts [r*E/N, (r+1)*E/N)). With dp_size > 1
    the ranks of a dp group pass identical tokens; with node_size > 1 ranks of a node copy
    directly through shared memory. `proxy="thread"` (default) runs the engine-side steps on a
    proxy thread (overflow WRITEs go out as soon as the routes are in); "inline" runs them in
    the calling thread between the device steps.

    `engine`: the process's `fabric_lib.Engine`, which its other workloads (KV, weights) share;
    the Buffer takes its immediates from the engine's reservations and gives them and its
    registration back on close(). Without it the Buffer makes an engine of its own from
    `provider` (default "shm"), `bind_address`, `request_timeout_ms` (5000), `busy_poll`,
    `record_post_timings` and the idle policy `idle_spin_us`, `idle_yield_us`, `idle_sleep_us`
    (as in `fabric_lib.Engine`; None keeps the engine's default); with it, none of these may be
    given (InvalidArgumentError): set them on the Engine.
    """

    def __init__(
        self,
        rank: int,
        world_size: int,
        num_experts: int,
        hidden: int,
        num_max_dispatch_tokens_per_rank: int,
        top_k: int,
        *,
        store: Any = None,
        all_gather: Optional[Callable[[bytes], list[bytes]]] = None,
        key: str = "fabric_lib.moe",
        engine: Optional[Engine] = None,
        provider: Optional[str] = None,
        x_dtype: Any = "bf16",
        num_scales: int = 0,
        combine_dtype: str = "bf16",
        out_dtype: str = "f32",
        max_private_tokens: int = 16,
        dp_size: int = 1,
        node_size: int = 1,
        expert_alignment: int = 1,
        timeout_ms: int = 10000,
        host_threads: int = 1,
        request_timeout_ms: Optional[int] = None,
        record_post_timings: Optional[bool] = None,
        busy_poll: Optional[bool] = None,
        bind_address: Optional[str] = None,
        proxy: str = "thread",
        idle_spin_us: Optional[int] = None,
        idle_yield_us: Optional[int] = None,
        idle_sleep_us: Optional[int] = None,
    ) -> None:
        own_engine = {k: v for k, v in (
            ("provider", provider), ("request_timeout_ms", request_timeout_ms),
            ("record_post_timings", record_post_timings), ("busy_poll", busy_poll),
            ("bind_address", bind_address), ("idle_spin_us", idle_spin_us),
            ("idle_yield_us", idle_yield_us), ("idle_sleep_us", idle_sleep_us)) if v is not None}
        if engine is not None:
            if not isinstance(engine, Engine):
                raise InvalidArgumentError(
                    f"moe Buffer: engine= takes a fabric_lib.Engine, not {type(engine).__name__}")
            if own_engine:
                raise InvalidArgumentError(
                    f"moe Buffer: engine= was given, so {', '.join(sorted(own_engine))} cannot be: "
                    "they configure the engine a Buffer makes for itself (set them on the "
                    "fabric_lib.Engine instead)")
        own_engine.setdefault("provider", "shm")
        if all_gather is None:
            if store is None:
                raise InvalidArgumentError("pass store= (a key-value store) or all_gather=")
            all_gather = store_all_gather(store, rank, world_size, key)
        element_bytes = {"bf16": 2, "fp8": 1, "f32": 4, "u8": 1}.get(str(x_dtype))
        if element_bytes is None:
            raise InvalidArgumentError(f"x_dtype must be 'bf16', 'fp8', 'u8' or 'f32', not {x_dtype!r}")
        self.rank, self.world_size, self.hidden, self.top_k = rank, world_size, hidden, top_k
        self.num_experts, self.num_scales = num_experts, num_scales
        self.max_tokens = num_max_dispatch_tokens_per_rank
        self._element_bytes = element_bytes
        aliases = {"bfloat16": "bf16", "float32": "f32"}
        self._combine_dtype = aliases.get(combine_dtype, combine_dtype)
        self._out_dtype = aliases.get(out_dtype, out_dtype)
        _check_same_shape(all_gather, rank, dict(
            num_experts=num_experts, hidden=hidden, num_max_dispatch_tokens_per_rank=self.max_tokens,
            top_k=top_k, x_dtype=str(x_dtype), num_scales=num_scales, combine_dtype=self._combine_dtype,
            out_dtype=self._out_dtype, dp_size=dp_size, node_size=node_size))
        self._group = _moe.Group(
            rank, world_size, num_experts, hidden, num_max_dispatch_tokens_per_rank, top_k, all_gather,
            dispatch_element_bytes=element_bytes, num_scales=num_scales,
            combine_input=combine_dtype, combine_output=out_dtype,
            max_private_tokens=max_private_tokens, dp_size=dp_size, node_size=node_size,
            expert_alignment=expert_alignment, timeout_ms=timeout_ms, host_threads=host_threads,
            proxy=proxy, engine=engine, **own_engine)
        layout = self._group.layout()
        self.layout = layout
        self.num_local_experts = layout["local_experts"]
        rows = layout["recv_rows"]
        # Receive side tensors, allocated once and reused by every call (views are returned).
        self._recv_x = np.zeros((rows, hidden * element_bytes), np.uint8)
        self._recv_scales = np.zeros((rows, max(num_scales, 0)), np.float32)
        self._recv_count = np.zeros(self.num_local_experts, np.uint32)
        out_bytes = 2 if out_dtype == "bf16" else 4
        self._out = np.zeros((num_max_dispatch_tokens_per_rank, hidden * out_bytes), np.uint8)
        self._x_dtype = x_dtype
        self._pending: Optional[Handle] = None  # the dispatch that awaits its combine
        # Per phase: calls, tokens and seconds inside the native send and receive halves
        # (metric_counts(); read without waiting for the proxy, unlike stats()).
        self._phases = {p: {"calls": 0, "tokens": 0, "seconds": 0.0} for p in ("dispatch", "combine")}

    # -- dispatch ---------------------------------------------------------------------------

    def dispatch(self, x: Any, topk_idx: Any, topk_weights: Any = None, *, scales: Any = None,
                 return_recv_hook: bool = False):
        """Sends each token to the ranks of its top-k experts.

        Returns (recv_x, recv_count, handle): recv_x holds every token received for this rank's
        local experts, grouped by expert (expert e's rows start at handle.expert_begin[e], there
        are recv_count[e] of them, in (source rank, token) order); with return_recv_hook=True it
        returns (recv_x, recv_count, handle, hook) after the send half only, and recv_x is valid
        once hook() has run.

        Zero copy: x is staged straight from the caller's memory (when contiguous), and recv_x
        and recv_count are views (torch tensors for torch input) of this Buffer's receive
        tensors, which the device reorders the arrived tokens into. They stay valid until the
        next dispatch on this Buffer overwrites them; keep a copy to hold them longer.

        Bad input (a wrong dtype or hidden size, more tokens than max_tokens, an expert id out
        of range or twice in a row) raises InvalidArgumentError on this rank before anything is
        sent; the other ranks then fail this iteration within timeout_ms, naming this rank.
        """
        if self._pending is not None:
            raise InvalidArgumentError(
                f"moe dispatch: dispatch {self._pending.epoch} is not combined yet (each dispatch "
                "needs its combine before the next dispatch)")
        _check_tensor("x", x, _X_DTYPES[str(self._x_dtype)], self.hidden)
        torch_in = _is_torch(x)
        xr = _raw(x)
        tokens = int(xr.shape[0]) if xr.ndim else 0
        if tokens > self.max_tokens:
            raise InvalidArgumentError(
                f"moe dispatch: x has {tokens} tokens, more than num_max_dispatch_tokens_per_rank "
                f"{self.max_tokens}")
        idx = self._topk("topk_idx", topk_idx, tokens, integer=True)
        sc = _raw(scales, np.float32) if scales is not None else np.zeros((tokens, 0), np.float32)
        weights = self._topk("topk_weights", topk_weights, tokens) if topk_weights is not None else None
        started = time.perf_counter()
        self._group.dispatch_send(xr.reshape(-1).view(np.uint8), sc, idx, tokens)
        self._count("dispatch", tokens, started)
        handle = Handle(tokens=tokens, recv_count=self._recv_count, expert_begin=[], topk_weights=weights,
                        epoch=self._group.epoch, torch_output=torch_in)
        self._pending = handle

        def hook() -> None:
            if handle._done[0]:
                return
            started = time.perf_counter()
            try:
                self._group.dispatch_recv(self._recv_x, self._recv_scales, self._recv_count)
                self._count("dispatch", 0, started, call=False)
            except BaseException:
                self._pending = None  # the group keeps the error; later calls raise it
                raise
            handle.expert_begin = list(self._group.expert_begin())
            handle._done[0] = True

        recv_x = self._typed(self._recv_x, self._x_dtype, torch_in)
        recv_count = self._recv_count
        if torch_in:
            recv_count = torch.from_numpy(self._recv_count.view(np.int32))
        if return_recv_hook:
            return recv_x, recv_count, handle, hook
        hook()
        return recv_x, recv_count, handle

    def recv_scales(self):
        """The FP32 scales that came with recv_x (rows as recv_x)."""
        return self._recv_scales

    # -- combine ----------------------------------------------------------------------------

    def combine(self, x: Any, handle: Handle, topk_weights: Any = None, *, out: Any = None,
                return_recv_hook: bool = False):
        """Sends the expert outputs back and sums them per token: out[t] = sum_k w[t,k] * y(t,k).

        x has recv_x's rows (the expert outputs, in the grouped order dispatch returned) in
        combine_dtype; the sum runs in FP32 with k in order, so results are bitwise repeatable.
        Returns out [tokens, hidden] (out_dtype), or (out, hook) with return_recv_hook=True.

        `out`, when given (a contiguous [tokens, hidden] tensor or array of out_dtype), is
        written in place and returned; otherwise the result is a view of this Buffer's output
        tensor, valid until the next combine. `handle` must be the last dispatch's, after its
        receive hook ran; anything else raises InvalidArgumentError without touching the group.
        """
        self._check_handle(handle)
        weights = self._topk("topk_weights", topk_weights, handle.tokens) if topk_weights is not None \
            else handle.topk_weights
        if weights is None:
            raise InvalidArgumentError("moe combine: needs topk_weights (here or at dispatch)")
        _check_tensor("x", x, _X_DTYPES[self._combine_dtype], self.hidden, rows=self.layout["recv_rows"])
        if out is not None:
            _check_tensor("out", out, _X_DTYPES[self._out_dtype], self.hidden, rows=handle.tokens,
                          exact_rows=True, contiguous=True)
            target, result = _raw(out), out
        else:
            target = self._out
            result = self._typed(self._out[: handle.tokens], self._out_dtype, handle.torch_output)
        xr = _raw(x)
        started = time.perf_counter()
        self._group.combine_send(xr.reshape(-1).view(np.uint8))
        self._count("combine", handle.tokens, started)
        self._pending = None
        done = [False]

        def hook() -> None:
            if not done[0]:
                started = time.perf_counter()
                self._group.combine_recv(weights.reshape(-1), target.reshape(-1).view(np.uint8))
                self._count("combine", 0, started, call=False)
                done[0] = True

        if return_recv_hook:
            return result, hook
        hook()
        return result

    def _check_handle(self, handle: Handle) -> None:
        """combine's handle is the dispatch in progress, received: else nothing is touched."""
        pending = self._pending
        if pending is None:
            raise InvalidArgumentError(
                f"moe combine: no dispatch to combine (handle of dispatch {handle.epoch}; "
                "every dispatch is combined once, after it)")
        if handle is not pending:
            raise InvalidArgumentError(
                f"moe combine: the handle is of dispatch {handle.epoch}, the dispatch in progress "
                f"is {pending.epoch}")
        if not handle._done[0]:
            raise InvalidArgumentError(
                f"moe combine: dispatch {handle.epoch}'s receive hook has not run (call hook() first)")

    def _topk(self, name: str, a: Any, tokens: int, integer: bool = False) -> np.ndarray:
        """topk_idx (int32) or topk_weights (float32) as [tokens, top_k], shape checked."""
        if _is_torch(a) and not integer:
            a = a.detach().float()  # bfloat16 weights by value, not by bit pattern
        arr = _raw(a)
        if integer and arr.dtype.kind not in "iu":
            raise InvalidArgumentError(f"moe: {name} must hold integers, not {arr.dtype}")
        if arr.shape != (tokens, self.top_k) and not (tokens == 0 and arr.size == 0):
            raise InvalidArgumentError(
                f"moe: {name} is {list(arr.shape)}, [{tokens}, {self.top_k}] (tokens, top_k) needed")
        return np.ascontiguousarray(arr.reshape(tokens, self.top_k), np.int32 if integer else np.float32)

    # -- introspection ----------------------------------------------------------------------

    def expert_rows(self, recv_x: Any, handle: Handle) -> list[Any]:
        """recv_x split into one [recv_count[e], hidden] view per local expert."""
        count = [int(c) for c in np.asarray(handle.recv_count).reshape(-1)]
        return [recv_x[b : b + c] for b, c in zip(handle.expert_begin, count)]

    @property
    def combine_dtype(self) -> str:
        """What combine takes from the experts: 'bf16' or 'f32'."""
        return self._combine_dtype

    @property
    def out_dtype(self) -> str:
        """What combine returns: 'bf16' or 'f32'."""
        return self._out_dtype

    def stats(self) -> dict:
        return self._group.stats()

    def _count(self, phase: str, tokens: int, started: float, call: bool = True) -> None:
        c = self._phases[phase]
        c["calls"] += 1 if call else 0
        c["tokens"] += tokens
        c["seconds"] += time.perf_counter() - started

    def metric_counts(self) -> dict[str, float]:
        """What fabric_lib.metrics exports as fabric_moe_*: per phase (dispatch, combine) the
        calls, the tokens this rank sent, and the seconds spent in the native send and receive."""
        return {f"{phase}_{k}": v for phase, c in self._phases.items() for k, v in c.items()}

    def timeline(self) -> dict:
        return self._group.timeline()

    def post_timings(self) -> list:
        return self._group.post_timings()

    def broken_ranks(self) -> list[int]:
        return list(self._group.broken_ranks())

    def quiesce(self) -> None:
        """Waits for the last barrier and checks no immediate arrived beyond the plans."""
        self._group.quiesce()

    def close(self) -> None:
        self._group.close()

    def __enter__(self) -> "Buffer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _typed(self, raw: np.ndarray, dtype: str, torch_out: bool):
        """A typed view of raw bytes: numpy (bf16 as uint16) or torch (bf16 as bfloat16)."""
        kind = {"bf16": np.uint16, "f32": np.float32, "fp8": np.uint8, "u8": np.uint8}[str(dtype)]
        view = raw.view(kind)
        if not torch_out:
            return view
        t = torch.from_numpy(view.view(np.int16) if kind is np.uint16 else view)
        return t.view(torch.bfloat16) if kind is np.uint16 else t
