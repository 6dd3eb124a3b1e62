"""FabricConnector: vLLM KV connector (KVConnectorBase_V1) over fabric_lib.kv, push mode.

Load it with
    KVTransferConfig(kv_connector="FabricConnector",
                     kv_connector_module_path="fabric_lib.vllm.connector",
                     kv_role="kv_producer" | "kv_consumer",
                     kv_connector_extra_config={"address_file": PATH, "provider": "tcp"})
and give each request to transfer the same id on both sides:
    SamplingParams(extra_args={"kv_transfer_params": {"fabric_id": "req-1"}})

Producer (prefill): each prefill chunk's complete blocks (from the first chunk on, blocks that
hit the producer's prefix cache too) are written into the consumer's pages layer by layer, as
vLLM calls save_kv_layer after each layer's forward; the last chunk completes the rest.
request_finished holds the blocks until the writes completed. Consumer (decode): the
scheduler reports the prompt's tokens past its own prefix-cache hit, but the last, as loaded
asynchronously; the worker asks the producer for those blocks only (never a block another
request shares) and get_finished reports the request once the exact number of immediates the
plan predicts has landed.

Faults stay per request: a duplicate or malformed id, a dead or restarted producer, a load that
does not finish within load_timeout_s fail that request (vLLM's kv_load_failure_policy then
fails it or recomputes it, once); nothing raises into vLLM's engine loop. docs/vllm.md.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)
from vllm.logger import init_logger

import fabric_lib as fl
import fabric_lib.kv as fkv

from ._ids import BadTransferParams, fabric_address, fabric_id, producer_id, wire_id
from ._source import ProducerSource

try:  # vLLM with request-keyed load failures (KVConnectorTransferResults.failed_recving)
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorTransferResults
except ImportError:  # older vLLM: failures go by block id (get_block_ids_with_load_errors)
    KVConnectorTransferResults = None  # type: ignore[assignment,misc]
try:  # transfer statistics in vLLM's logging and /metrics (vllm:fabric_*)
    from ._stats import FabricConnectorStats, FabricPromMetrics
except ImportError:  # a vLLM without connector metrics
    FabricConnectorStats = FabricPromMetrics = None  # type: ignore[assignment,misc]
try:  # the worker tells the scheduler its address, which request_finished returns
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorHandshakeMetadata
except ImportError:
    KVConnectorHandshakeMetadata = object  # type: ignore[assignment,misc]

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.attention.backend import AttentionMetadata
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.outputs import KVConnectorOutput
    from vllm.v1.request import Request

# Under vllm.* so that vLLM's logging configuration prints it.
logger = init_logger("vllm.fabric_connector")

# kv_connector_extra_config keys and their defaults (docs/vllm.md lists them).
DEFAULTS: dict[str, Any] = {
    # The producer writes its address here; the consumer reads it for requests that carry no
    # fabric_address (the producer's returned kv_transfer_params). Needed for those only.
    "address_file": None,
    "provider": "tcp",
    "bind_address": "127.0.0.1",
    "request_timeout_ms": 5000,  # the engine's bound on one operation; part of the dead-peer bound
    "heartbeat_ms": 1000,  # a peer silent for 2 heartbeats + request_timeout_ms is dead
    # producer: blocks of a request no consumer asks for are freed after this. Long, as vLLM's
    # own NIXL default (480 s): a consumer asks from its engine step, and a step of a loaded
    # CPU host can take a minute (docs/vllm.md, Limits).
    "receiver_timeout_ms": 480000,
    "load_timeout_s": 30.0,  # consumer: a load not done by then fails (or is recomputed)
    # consumer: one connect to a producer. It holds up the engine step, and happens once per
    # new producer, or once more for a dead one (kv re-admits a fenced rank that speaks again).
    "connect_timeout_s": 3.0,
    "startup_wait_s": 300.0,  # consumer: how long start-up waits for the address file
    "quarantine_ms": 30000,
    "spread": 0,
    "total_kv_heads": None,  # default: the heads of this rank's cache (TP 1)
    "head_begin": 0,
    # cpulist ("2-3") for the connector engine's threads, for deployments that reserve cores for
    # communication; None: the engine's own policy (FABRIC_CPUS, else the process's CPUs; never
    # the pin vLLM gives its worker thread).
    "thread_cpus": None,
}


def _blocks(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


@dataclass
class _Transfer:
    req_id: str  # vLLM's request id on this instance
    wire_id: str  # the id both instances use in the kv module (_ids.wire_id)
    block_ids: list[int]  # the blocks that move: the producer's sources, the consumer's targets
    src_first: int = 0  # consumer: the producer's first block wanted (blocks before are cached)
    address: bytes | None = None  # consumer: the producer, when the request names it
    corrupt: bool = False  # test hook: overwrite the landed KV (the control run)


@dataclass
class FabricHandshake(KVConnectorHandshakeMetadata):
    address: str  # the producer worker's Sender address, hex


@dataclass
class _Chunk:
    """Producer: what one step does for one request whose prompt is still going out."""

    req_id: str
    wire_id: str
    pages: list[int]  # blocks handed over this step, after those handed over before
    total: int  # blocks the request sends in all (what a consumer may ask for)
    first: bool  # the first step: prepare the Sender with these pages
    blocks: tuple[int, int] | None  # blocks [begin, end) complete after this step's layers
    applied: bool = False  # worker: pages handed to the Sender this step


@dataclass
class _Stream:
    """Producer, scheduler side: a request's blocks going out chunk by chunk."""

    request: Request
    wire_id: str
    total: int
    given: int = 0  # blocks handed to the worker so far
    sent: int = 0  # blocks whose layers are written from the steps so far


@dataclass
class FabricConnectorMetadata(KVConnectorMetadata):
    saves: list[_Chunk] = field(default_factory=list)  # producer: this step's chunks
    cancels: list[str] = field(default_factory=list)  # producer: wire ids to stop sending
    loads: list[_Transfer] = field(default_factory=list)  # consumer: request these this step
    unloads: list[str] = field(default_factory=list)  # consumer: req_ids finished while loading
    # consumer: (wire id, producer address) of requests it will not ask for (prefix cache hit)
    declines: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass
class _Load:
    transfer: _Transfer
    started: float
    asked: bool = False  # the kv module holds a request under transfer.wire_id for it
    error: str | None = None  # failed before or after asking
    cancelled: bool = False  # cancel sent (load_timeout_s ran out, or the request finished)
    expired: bool = False  # load_timeout_s ran out


@dataclass
class _Save:
    wire_id: str
    prepared: bool = False
    error: str | None = None


class FabricConnector(KVConnectorBase_V1):
    def __init__(
        self,
        vllm_config: VllmConfig,
        role: KVConnectorRole,
        kv_cache_config: KVCacheConfig | None = None,
    ) -> None:
        super().__init__(vllm_config, role, kv_cache_config)
        cfg = self._kv_transfer_config
        self._extra: dict[str, Any] = {**DEFAULTS, **dict(cfg.kv_connector_extra_config or {})}
        unknown = set(self._extra) - set(DEFAULTS)
        if unknown:
            logger.warning("FabricConnector: unknown kv_connector_extra_config keys %s", unknown)
        groups = getattr(kv_cache_config, "kv_cache_groups", None)
        if groups is not None and len(groups) > 1:
            # Hybrid models (several KV cache groups) would need one transfer per group.
            raise fl.InvalidArgumentError(
                f"FabricConnector: the model has {len(groups)} KV cache groups; only models with "
                "one (plain attention) are supported"
            )
        self._producer = bool(cfg.is_kv_producer)
        self._block_size = vllm_config.cache_config.block_size
        # Scheduler side.
        self._pending: list[_Transfer] = []
        self._streams: dict[str, _Stream] = {}  # producer: prompts not yet fully handed over
        self._prepared: dict[str, str] = {}  # producer: req_id -> wire id, handed to the worker
        self._cancels: list[str] = []  # producer: wire ids to stop, in the next metadata
        self._local_hit: dict[str, int] = {}  # consumer: req_id -> locally cached tokens
        self._loading: dict[str, list[int]] = {}  # consumer: req_id -> blocks being loaded
        self._no_external: set[str] = set()  # consumer: loads failed, recompute locally once
        self._unloads: list[str] = []  # consumer: aborted while loading, in the next metadata
        self._declines: list[tuple[str, bytes | None]] = []  # consumer: for the next metadata
        self._producer_address: str | None = None  # producer: its worker's, from the handshake
        # Worker side.
        self._sender: fkv.Sender | None = None
        self._receiver: fkv.Receiver | None = None
        self._source: ProducerSource | None = None
        self._layer_index: dict[str, int] = {}
        self._kv_caches: list[torch.Tensor] = []
        self._saves: dict[str, _Save] = {}  # req_id -> save, until reported finished
        self._finished_seen: set[str] = set()
        self._loads: dict[str, _Load] = {}
        self._failed_recving: set[str] = set()
        self._load_errors: set[int] = set()
        # Per-step statistics for vLLM's logging and /metrics, and bytes of one block (all layers).
        self._stats = FabricConnectorStats() if FabricConnectorStats is not None else None
        self._block_bytes = 0
        # Worker-side counts since start (tests read them; docs/vllm.md).
        self.counts: dict[str, int] = dict.fromkeys(
            ("loads", "load_blocks", "offset_loads", "load_failures", "sends", "send_failures",
             "early_chunks", "declines", "sends_done"), 0)

    # ------------------------------------------------------------------ scheduler side

    def _params(self, request: Request) -> tuple[str, bytes | None] | None:
        """(wire id, producer address or None) of a request to transfer; None when it asks for
        no transfer or its kv_transfer_params are malformed (it then runs locally)."""
        try:
            user = self._user_id(request)
            if user is None:
                return None
            address = None if self._producer else fabric_address(request.kv_transfer_params)
        except BadTransferParams as e:
            logger.warning("FabricConnector: request %s runs without a transfer: %s",
                           request.request_id, e)
            return None
        return wire_id(user, request.prompt_token_ids), address

    def _user_id(self, request: Request) -> str | None:
        """The request's fabric_id; a producer makes one from vLLM's request id for a request
        that asks only for a remote decode (a proxy's "do_remote_decode")."""
        if self._producer:
            return producer_id(request.kv_transfer_params, request.request_id)
        return fabric_id(request.kv_transfer_params)

    def _wire_id(self, request: Request) -> str | None:
        params = self._params(request)
        return None if params is None else params[0]

    def get_num_new_matched_tokens(
        self, request: Request, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        if self._producer or request.request_id in self._no_external:
            return 0, False  # a failed load is recomputed here, and only once
        if self._wire_id(request) is None:
            return 0, False
        # Everything but the last prompt token comes from the producer, past what the local
        # prefix cache holds (num_computed_tokens, block-aligned); computing the last one here
        # gives the first token's logits.
        n = len(request.prompt_token_ids or []) - 1 - num_computed_tokens
        # Marks the request's admission for update_state_after_alloc (which vLLM calls again,
        # with no external tokens, when a loaded request is scheduled to compute).
        self._local_hit[request.request_id] = num_computed_tokens
        return (n, True) if n > 0 else (0, False)

    def update_state_after_alloc(
        self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int
    ) -> None:
        if self._producer:
            wid = self._wire_id(request)
            # A 1-token prompt leaves the consumer nothing to ask for: holding blocks for it
            # would only wait for receiver_timeout_ms.
            # A request preempted after its send began is not offered again: that send was
            # cancelled (its blocks were freed), and the consumer's load fails or recomputes.
            prompt = len(request.prompt_token_ids or [])
            if wid is not None and prompt > 1 and request.request_id not in self._prepared:
                total = _blocks(prompt - 1, self._block_size)  # the consumer asks for prompt - 1
                self._streams[request.request_id] = _Stream(request, wid, total)
            return
        local = self._local_hit.pop(request.request_id, None)
        if local is None:  # not its admission (or no transfer asked): nothing to do
            return
        parsed = self._params(request)
        if parsed is None:  # get_num_new_matched_tokens claimed nothing for it either
            return
        wid, address = parsed
        if num_external_tokens <= 0:
            # The local prefix cache covers the prompt: tell the producer, which would otherwise
            # hold the request's blocks for receiver_timeout_ms (not for a failed load being
            # recomputed, nor a 1-token prompt, which the producer never offers).
            if (request.request_id not in self._no_external
                    and len(request.prompt_token_ids or []) > 1):
                self._declines.append((wid, address))
            return
        # The blocks past the local hit are this request's own, newly allocated: the load writes
        # only those, never a cached block another request may share.
        first = local // self._block_size
        end = _blocks(local + num_external_tokens, self._block_size)
        block_ids = list(blocks.get_block_ids()[0])[first:end]
        params = request.kv_transfer_params or {}
        self._loading[request.request_id] = block_ids
        self._pending.append(
            _Transfer(request.request_id, wid, block_ids, src_first=first, address=address,
                      corrupt=bool(params.get("fabric_corrupt", False)))
        )

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> KVConnectorMetadata:
        meta = FabricConnectorMetadata()
        if not self._producer:
            meta.loads, self._pending = self._pending, []
            meta.unloads, self._unloads = self._unloads, []
            meta.declines, self._declines = self._declines, []
            return meta
        meta.cancels, self._cancels = self._cancels, []
        for req_id in scheduler_output.preempted_req_ids or ():
            # vLLM freed its blocks: what is still to be written from them must not be.
            self._streams.pop(req_id, None)
            if req_id in self._prepared:
                meta.cancels.append(self._prepared[req_id])
        scheduled = scheduler_output.num_scheduled_tokens
        assert self._kv_cache_manager is not None
        for req_id, st in list(self._streams.items()):
            if not scheduled.get(req_id):
                continue
            # num_computed_tokens is still the count before this step (vLLM advances it after
            # build_connector_meta). Blocks of earlier chunks and prefix-cache hits hold their
            # KV already; after this step's forward of a layer, that layer is complete for
            # every block the step completes, or for all of them at the prompt's last chunk.
            after = st.request.num_computed_tokens + scheduled[req_id]
            final = after >= len(st.request.prompt_token_ids or [])
            end = st.total if final else min(st.total, after // self._block_size)
            allocated = list(self._kv_cache_manager.get_blocks(req_id).get_block_ids()[0])
            allocated = allocated[: st.total]
            first = st.given == 0
            chunk = _Chunk(req_id, st.wire_id, allocated[st.given:], st.total, first,
                           (st.sent, end) if end > st.sent else None)
            if first or chunk.pages or chunk.blocks:
                meta.saves.append(chunk)
            st.given, st.sent = len(allocated), max(st.sent, end)
            if first:
                self._prepared[req_id] = st.wire_id
            if final:
                del self._streams[req_id]
        return meta

    def update_connector_output(self, connector_output: KVConnectorOutput) -> None:
        failed = set(getattr(connector_output, "failed_recving", None) or ())
        invalid = set(getattr(connector_output, "invalid_block_ids", None) or ())
        if invalid:
            failed |= {r for r, b in self._loading.items() if invalid.intersection(b)}
        for req_id in set(connector_output.finished_recving or ()) | failed:
            self._loading.pop(req_id, None)
        # Under kv_load_failure_policy="recompute" vLLM schedules these again: they are then
        # computed here, not claimed from the producer a second time.
        self._no_external |= failed

    def request_finished(
        self, request: Request, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        req_id = request.request_id
        unfinished = self._streams.pop(req_id, None)
        self._local_hit.pop(req_id, None)
        if self._loading.pop(req_id, None) is not None:
            # Finished (a client abort) while its KV is still coming: vLLM holds its blocks
            # until get_finished reports it; stop the load so that is soon.
            self._unloads.append(req_id)
        self._no_external.discard(req_id)
        wid = self._prepared.pop(req_id, None)
        if wid is not None:
            # The producer's blocks are sources of writes still in flight: hold them until
            # get_finished reports the request. The returned params are what a consumer needs
            # to ask for it (a proxy forwards them, as with vLLM's other P2P connectors).
            if unfinished is not None:  # aborted before its prompt was all computed
                self._cancels.append(wid)
            returned: dict[str, Any] = {"fabric_id": self._user_id(request)}
            if self._producer_address is not None:
                returned["fabric_address"] = self._producer_address
            return True, returned
        return False, None

    def set_xfer_handshake_metadata(self, metadata: dict[int, Any]) -> None:
        first = metadata.get(0)
        if isinstance(first, FabricHandshake):
            self._producer_address = first.address

    # ------------------------------------------------------------------ worker side

    def _engine_kwargs(self) -> dict[str, Any]:
        return {
            "provider": str(self._extra["provider"]),
            "bind_address": str(self._extra["bind_address"]),
            "request_timeout_ms": int(self._extra["request_timeout_ms"]),
            "heartbeat_ms": int(self._extra["heartbeat_ms"]),
            "thread_cpus": "" if self._extra["thread_cpus"] is None
                           else str(self._extra["thread_cpus"]),
        }

    def _layout(self) -> fkv.Layout:
        # vLLM's CPU attention cache per layer: [blocks, kv_heads, block_size, 2 * head_size],
        # read as [blocks, kv_heads, 2 * block_size, head_size]: per (block, head) a K block,
        # then a V block. Inside those its kernels use their own packed order, so a block is
        # moved whole: the layout's "token" is one block of one head (tokens_per_page = 1),
        # and both instances must use the same block_size (the fingerprint covers it).
        first = self._kv_caches[0]
        if first.dim() != 4:
            raise fl.InvalidArgumentError(f"FabricConnector: unsupported KV cache shape {tuple(first.shape)}")
        blocks, heads, block_size, width = first.shape
        total = self._extra["total_kv_heads"]
        return fkv.vllm_cpu(
            len(self._kv_caches),
            blocks,
            1,
            int(heads if total is None else total),
            int(self._extra["head_begin"]),
            heads,
            block_size * (width // 2),
            first.element_size(),
        )

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        self._layer_index = {name: i for i, name in enumerate(kv_caches)}
        self._kv_caches = list(kv_caches.values())
        self._block_bytes = sum(t[0].numel() * t.element_size() for t in self._kv_caches)
        for t in self._kv_caches:
            if not t.is_contiguous():
                raise fl.InvalidArgumentError("FabricConnector: KV cache tensors must be contiguous")
        layout = self._layout()
        address_file = self._extra["address_file"]
        engine = self._engine_kwargs()
        if self._producer:
            self._sender = fkv.Sender(
                layout,
                self._kv_caches,
                receiver_timeout_ms=int(self._extra["receiver_timeout_ms"]),
                **engine,
            )
            if address_file:
                tmp = f"{address_file}.{os.getpid()}.tmp"
                with open(tmp, "w") as f:
                    f.write(self._sender.address.hex())
                os.replace(tmp, str(address_file))  # readers never see half an address
            logger.info("FabricConnector producer: %d layers, address %s", layout.num_layers,
                        address_file or "returned in kv_transfer_params")
            return
        self._receiver = fkv.Receiver(
            layout,
            self._kv_caches,
            spread=int(self._extra["spread"]),
            quarantine_ms=int(self._extra["quarantine_ms"]),
            **engine,
        )
        self._source = ProducerSource(self._receiver, address_file or None,
                                      float(self._extra["connect_timeout_s"]), logger)
        if address_file:
            # Connect now if the producer is up (it may still be loading); otherwise the first
            # request connects. Never fatal: a missing producer fails requests, not the engine.
            self._source.wait_for_file(float(self._extra["startup_wait_s"]))
            try:
                self._source.get()
            except fl.FabricError as e:
                logger.warning("FabricConnector consumer: no producer yet (%s); requests connect",
                               e)

    def get_handshake_metadata(self) -> Any:
        if self._sender is None:
            return None
        return FabricHandshake(self._sender.address.hex())

    def start_load_kv(self, forward_context: ForwardContext, **kwargs: Any) -> None:
        # vLLM calls this after the forward when no load is synchronous, so the producer's
        # chunks are applied at their first save_kv_layer (or here, whichever comes first).
        meta = self._get_connector_metadata()
        assert isinstance(meta, FabricConnectorMetadata)
        if self._sender is not None:
            for chunk in meta.saves:
                self._apply(chunk)
            for wid in meta.cancels:
                self._cancel_send(wid)
        if self._receiver is not None:
            for t in meta.loads:
                self._ask(t)
            for req_id in meta.unloads:
                self._stop_load(req_id, "the request finished before its KV arrived")
            for wid, address in meta.declines:
                self._decline(wid, address)

    def _decline(self, wid: str, address: bytes | None) -> None:
        """Best effort: a producer that misses it holds the request until receiver_timeout_ms."""
        assert self._receiver is not None and self._source is not None
        try:
            self._receiver.decline(wid, [self._source.get(address)])
            self.counts["declines"] += 1
        except Exception as e:  # noqa: BLE001
            logger.info("FabricConnector: could not decline %s: %s", wid, e)

    def _stop_load(self, req_id: str, why: str) -> None:
        """Cancels a load; it is reported (failed) once no write of it can land any more."""
        load = self._loads.get(req_id)
        if load is None or load.cancelled:
            return
        load.cancelled = True
        load.error = load.error or why
        if load.asked:
            assert self._receiver is not None
            try:
                self._receiver.cancel(load.transfer.wire_id)
            except Exception as e:  # noqa: BLE001
                logger.warning("FabricConnector: cancelling %s: %s", load.transfer.wire_id, e)

    def _apply(self, chunk: _Chunk) -> _Save:
        """Hands this step's pages of a request to the Sender (prepare, or add_pages), once."""
        save = self._saves.setdefault(chunk.req_id, _Save(chunk.wire_id))
        if chunk.applied:
            return save
        chunk.applied = True
        if chunk.blocks is not None and chunk.blocks[1] < chunk.total:
            self.counts["early_chunks"] += 1  # blocks sent before the prompt's last chunk
        assert self._sender is not None
        try:
            if chunk.first:  # whole blocks (see _layout): one "token" per block
                self._sender.prepare(chunk.wire_id, chunk.pages, chunk.total)
                save.prepared = True
                self.counts["sends"] += 1
                self._stat("sends")
            elif chunk.pages and save.prepared and save.error is None:
                self._sender.add_pages(chunk.wire_id, chunk.pages)
        except Exception as e:  # noqa: BLE001 - e.g. a duplicate id: that request's send fails
            save.error = str(e)
            self.counts["send_failures"] += 1
            self._stat("failed_sends")
            logger.warning("FabricConnector: cannot send %s (%s): %s", chunk.wire_id,
                           chunk.req_id, e)
            if save.prepared:
                self._cancel_send(chunk.wire_id)
        return save

    def _ask(self, t: _Transfer) -> None:
        load = _Load(t, time.monotonic())
        if t.req_id in self._loads:  # vLLM reuses no request id while it is loading
            logger.warning("FabricConnector: %s is loading already", t.req_id)
            return
        self._loads[t.req_id] = load
        assert self._receiver is not None and self._source is not None
        for attempt in (0, 1):
            try:
                source = self._source.get(t.address)
                # Whole blocks: slots past the loaded tokens are written here before they are
                # read (the last prompt token and every decoded one).
                expected = self._receiver.request(t.wire_id, t.block_ids, len(t.block_ids),
                                                  [source], src_first=t.src_first)
                load.asked = True
                logger.debug("FabricConnector: asked for %s (%d blocks from block %d, %d "
                             "immediates)", t.wire_id, len(t.block_ids), t.src_first, expected)
                return
            except fl.InvalidArgumentError as e:
                if "exists" in str(e):  # a duplicate id: only this request fails
                    load.error = str(e)
                    break
                load.error = str(e)  # e.g. the cached producer died: look it up again, once
            except Exception as e:  # noqa: BLE001 - per request, never into the engine loop
                load.error = str(e)
            if attempt == 0:
                self._source.forget()
        logger.warning("FabricConnector: cannot load %s (%s): %s", t.wire_id, t.req_id, load.error)

    def wait_for_layer_load(self, layer_name: str) -> None:
        return  # loads are asynchronous: the request waits in the scheduler until get_finished

    def save_kv_layer(
        self,
        layer_name: str,
        kv_layer: torch.Tensor,
        attn_metadata: AttentionMetadata,
        **kwargs: Any,
    ) -> None:
        if self._sender is None or not self.has_connector_metadata():
            return
        meta = self._get_connector_metadata()
        assert isinstance(meta, FabricConnectorMetadata)
        if not meta.saves:
            return
        layer = self._layer_index[layer_name]
        for chunk in meta.saves:
            save = self._apply(chunk)
            if chunk.blocks is None or not save.prepared or save.error is not None:
                continue
            try:
                self._sender.layer_done(chunk.wire_id, layer, chunk.blocks)
            except Exception as e:  # noqa: BLE001 - fail this send, keep the engine
                save.error = str(e)
                logger.warning("FabricConnector: sending layer %d of %s: %s", layer,
                               chunk.wire_id, e)
                self._cancel_send(chunk.wire_id)

    def _cancel_send(self, wid: str) -> None:
        try:
            assert self._sender is not None
            self._sender.cancel(wid)
        except Exception as e:  # noqa: BLE001
            logger.warning("FabricConnector: cancelling %s: %s", wid, e)

    def wait_for_save(self) -> None:
        return  # writes complete in the background; request_finished held the blocks

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        sending = self._finished_sends(finished_req_ids) if self._sender is not None else set()
        recving = self._finished_loads() if self._receiver is not None else set()
        return sending or None, recving or None

    def _finished_sends(self, finished_req_ids: set[str]) -> set[str]:
        assert self._sender is not None
        done: set[str] = set()
        # Only ids with a send: vLLM reports every finished request, most without one.
        self._finished_seen |= finished_req_ids & self._saves.keys()
        for req_id in list(self._saves):
            if req_id not in self._finished_seen:
                continue
            save = self._saves[req_id]
            wid = save.wire_id
            if save.prepared:
                try:
                    state, error = self._sender.poll(wid)
                except Exception as e:  # noqa: BLE001
                    state, error = "failed", str(e)
                if state not in fkv.TERMINAL:
                    continue
                if state == "done":
                    self.counts["sends_done"] += 1
                else:
                    logger.warning("FabricConnector: sending %s %s: %s", wid, state, error)
                    self.counts["send_failures"] += 1
                    # "N of M decoders asked ... in time": no consumer claimed it.
                    self._stat("expired_reqs" if "in time" in str(error) else "failed_sends")
                try:
                    self._sender.release(wid)
                except Exception as e:  # noqa: BLE001
                    logger.warning("FabricConnector: releasing %s: %s", wid, e)
            del self._saves[req_id]
            self._finished_seen.discard(req_id)
            done.add(req_id)
        return done

    def _finished_loads(self) -> set[str]:
        assert self._receiver is not None
        done: set[str] = set()
        timeout = float(self._extra["load_timeout_s"])
        now = time.monotonic()
        for req_id, load in list(self._loads.items()):
            t = load.transfer
            if load.asked:
                try:
                    state, error = self._receiver.poll(t.wire_id)
                except Exception as e:  # noqa: BLE001
                    state, error = "failed", str(e)
                if state not in fkv.TERMINAL:
                    if now - load.started > timeout and not load.cancelled:
                        # Never started or stalled: stop it; it turns cancelled once no write of
                        # it can land any more, and then fails here.
                        why = f"not loaded within load_timeout_s={timeout:g}"
                        logger.warning("FabricConnector: %s %s", t.wire_id, why)
                        load.expired = True
                        self._stop_load(req_id, why)
                    continue
                if state != "done":
                    load.error = load.error or f"{state}: {error}"
                else:
                    load.error = None  # landed whole, even if a late cancel raced it
                try:
                    self._receiver.release(t.wire_id)
                except Exception as e:  # noqa: BLE001
                    logger.warning("FabricConnector: releasing %s: %s", t.wire_id, e)
            if load.error is not None:
                logger.warning("FabricConnector: load of %s (%s) failed: %s", t.wire_id, req_id,
                               load.error)
                self._failed_recving.add(req_id)
                self._load_errors.update(t.block_ids)
                self.counts["load_failures"] += 1
                self._stat("expired_reqs" if load.expired else "failed_transfers")
                # The producer may have died or restarted: look it up afresh next time.
                assert self._source is not None
                self._source.forget()
            else:
                self.counts["loads"] += 1
                self.counts["load_blocks"] += len(t.block_ids)
                if self._stats is not None:
                    self._stats.record_load(now - load.started,
                                            len(t.block_ids) * self._block_bytes)
                self.counts["offset_loads"] += 1 if t.src_first > 0 else 0
                if t.corrupt:
                    self._corrupt(t)
            del self._loads[req_id]
            done.add(req_id)
        return done

    def get_transfer_results(self, finished_req_ids: set[str]) -> Any:
        sending, recving = self.get_finished(finished_req_ids)
        failed, self._failed_recving = self._failed_recving, set()
        self._load_errors.clear()  # reported by request id instead
        assert KVConnectorTransferResults is not None
        return KVConnectorTransferResults(
            finished_sending=set(sending or ()),
            finished_recving=set(recving or ()),
            failed_recving=failed,
        )

    def _stat(self, key: str) -> None:
        if self._stats is not None:
            self._stats.count(key)

    def get_kv_connector_stats(self) -> Any:
        """This step's statistics (vLLM aggregates them), then a fresh set."""
        if self._stats is None or self._stats.is_empty():
            return None
        stats, self._stats = self._stats, FabricConnectorStats()
        return stats

    @classmethod
    def build_kv_connector_stats(cls, data: dict[str, Any] | None = None) -> Any:
        if FabricConnectorStats is None:
            return None
        return FabricConnectorStats(data=dict(data) if data else {})

    @classmethod
    def build_prom_metrics(cls, vllm_config: Any, metric_types: dict, labelnames: list[str],
                           per_engine_labelvalues: dict[int, list[object]]) -> Any:
        if FabricPromMetrics is None:
            return None
        return FabricPromMetrics(vllm_config, metric_types, labelnames, per_engine_labelvalues)

    def _corrupt(self, t: _Transfer) -> None:
        # The control run: the KV that came over is overwritten, so the output must change.
        with torch.no_grad():
            for cache in self._kv_caches:
                for b in t.block_ids:
                    cache[b].normal_()

    def get_block_ids_with_load_errors(self) -> set[int]:
        errors, self._load_errors = self._load_errors, set()
        return errors

    def shutdown(self) -> None:
        for endpoint in (self._sender, self._receiver):
            if endpoint is not None:
                endpoint.close()
        self._sender = self._receiver = None


if KVConnectorTransferResults is None:  # older vLLM: only get_finished and block-keyed errors
    del FabricConnector.get_transfer_results

__all__ = ["DEFAULTS", "FabricConnector", "FabricConnectorMetadata", "FabricHandshake"]

