"""FabricConnector: vLLM KV connector (KVConnectorBase_V1) over fabric_lib.kv, push mode.

Load it with
    KVTransferConfig(kv_connector="FabricConnector",
                     kv_connector_module_path="fabric_lib.vllm.connector",
                     kv_role="kv_producer" | "kv_consumer",
                     kv_connector_extra_config={"address_file": PATH, "provider": "tcp"})
and give each request to transfer the same id on both sides:
    SamplingParams(extra_args={"kv_transfer_params": {"fabric_id": "req-1"}})

Producer (prefill): each layer's KV is written into the consumer's pages as soon as vLLM calls
save_kv_layer for it; request_finished holds the blocks until the writes completed. Consumer
(decode): the scheduler reports the prompt's tokens but the last as loaded asynchronously, the
worker sends the allocated block ids to the producer, and get_finished reports the request once
the exact number of immediates the plan predicts has landed. docs/kv.md#vllm has the details.
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

import fabric_lib.kv as fkv

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.attention.backend import AttentionMetadata
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

# Under vllm.* so that vLLM's logging configuration prints it.
logger = init_logger("vllm.fabric_connector")


@dataclass
class _Transfer:
    req_id: str  # vLLM's request id on this instance
    fabric_id: str  # the id both instances agree on (kv_transfer_params["fabric_id"])
    block_ids: list[int]
    num_tokens: int
    corrupt: bool = False  # test hook: overwrite the landed KV (the control run)


@dataclass
class FabricConnectorMetadata(KVConnectorMetadata):
    saves: list[_Transfer] = field(default_factory=list)  # producer: prepare these this step
    loads: list[_Transfer] = field(default_factory=list)  # consumer: request these this step


def _fabric_id(request: Request) -> str | None:
    params = request.kv_transfer_params or {}
    value = params.get("fabric_id")
    return None if value is None else str(value)


class FabricConnector(KVConnectorBase_V1):
    def __init__(
        self,
        vllm_config: VllmConfig,
        role: KVConnectorRole,
        kv_cache_config: KVCacheConfig | None = None,
    ) -> None:
        super().__init__(vllm_config, role, kv_cache_config)
        cfg = self._kv_transfer_config
        self._extra: dict[str, Any] = dict(cfg.kv_connector_extra_config or {})
        self._producer = bool(cfg.is_kv_producer)
        self._block_size = vllm_config.cache_config.block_size
        # Scheduler side.
        self._pending: list[_Transfer] = []
        self._sending: set[str] = set()
        # Worker side.
        self._sender: fkv.Sender | None = None
        self._receiver: fkv.Receiver | None = None
        self._layer_index: dict[str, int] = {}
        self._kv_caches: list[torch.Tensor] = []
        self._saves: dict[str, _Transfer] = {}  # req_id -> transfer, until reported
        self._finished_seen: set[str] = set()
        self._loads: dict[str, _Transfer] = {}
        self._load_errors: set[int] = set()

    # ------------------------------------------------------------------ scheduler side

    def get_num_new_matched_tokens(
        self, request: Request, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        if self._producer or _fabric_id(request) is None:
            return 0, False
        # Everything but the last prompt token comes from the producer; computing that one
        # here gives the first token's logits.
        n = len(request.prompt_token_ids or []) - 1 - num_computed_tokens
        return (n, True) if n > 0 else (0, False)

    def update_state_after_alloc(
        self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int
    ) -> None:
        fid = _fabric_id(request)
        if fid is None:
            return
        block_ids = list(blocks.get_block_ids()[0])
        if self._producer:
            n = len(request.prompt_token_ids or [])
            self._pending.append(_Transfer(request.request_id, fid, block_ids, n))
        elif num_external_tokens > 0:
            params = request.kv_transfer_params or {}
            self._pending.append(
                _Transfer(
                    request.request_id,
                    fid,
                    block_ids,
                    num_external_tokens,
                    corrupt=bool(params.get("fabric_corrupt", False)),
                )
            )

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> KVConnectorMetadata:
        meta = FabricConnectorMetadata()
        if self._producer:
            for t in self._pending:
                scheduled = scheduler_output.num_scheduled_tokens.get(t.req_id, 0)
                if scheduled != t.num_tokens:
                    # Each layer is written once, right after its compute: a prompt split over
                    # steps (chunked prefill) would send pages not yet computed.
                    raise NotImplementedError(
                        f"FabricConnector: request {t.req_id} prefills {scheduled} of "
                        f"{t.num_tokens} tokens this step; raise max_num_batched_tokens so "
                        "each prompt prefills in one step"
                    )
            meta.saves, self._pending = self._pending, []
        else:
            meta.loads, self._pending = self._pending, []
        return meta

    def request_finished(
        self, request: Request, block_ids: list[int]
    ) -> tuple[bool, dict[str, Any] | None]:
        # The producer's blocks are sources of writes still in flight: hold them until
        # get_finished reports the request.
        if self._producer and _fabric_id(request) is not None:
            return True, None
        return False, None

    # ------------------------------------------------------------------ worker side

    def _engine_kwargs(self) -> dict[str, Any]:
        return {
            "provider": str(self._extra.get("provider", "tcp")),
            "bind_address": str(self._extra.get("bind_address", "127.0.0.1")),
            "request_timeout_ms": int(self._extra.get("request_timeout_ms", 5000)),
            "heartbeat_ms": int(self._extra.get("heartbeat_ms", 1000)),
        }

    def _layout(self) -> fkv.Layout:
        # vLLM's CPU attention cache per layer: [blocks, kv_heads, block_size, 2 * head_size],
        # read as [blocks, kv_heads, 2 * block_size, head_size]: per (block, head) a K block,
        # then a V block. Inside those its kernels use their own packed order, so a block is
        # moved whole: the layout's "token" is one block of one head (tokens_per_page = 1),
        # and both instances must use the same block_size (the fingerprint covers it).
        first = self._kv_caches[0]
        if first.dim() != 4:
            raise ValueError(f"FabricConnector: unsupported KV cache shape {tuple(first.shape)}")
        blocks, heads, block_size, width = first.shape
        total = int(self._extra.get("total_kv_heads", heads))
        head_begin = int(self._extra.get("head_begin", 0))
        return fkv.vllm_cpu(
            len(self._kv_caches),
            blocks,
            1,
            total,
            head_begin,
            heads,
            block_size * (width // 2),
            first.element_size(),
        )

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        self._layer_index = {name: i for i, name in enumerate(kv_caches)}
        self._kv_caches = [t for t in kv_caches.values()]
        for t in self._kv_caches:
            if not t.is_contiguous():
                raise ValueError("FabricConnector: KV cache tensors must be contiguous")
        layout = self._layout()
        address_file = str(self._extra["address_file"])
        engine = self._engine_kwargs()
        if self._producer:
            self._sender = fkv.Sender(
                layout,
                self._kv_caches,
                receiver_timeout_ms=int(self._extra.get("receiver_timeout_ms", 300000)),
                **engine,
            )
            tmp = address_file + ".tmp"
            with open(tmp, "w") as f:
                f.write(self._sender.address.hex())
            os.replace(tmp, address_file)  # readers never see half an address
            logger.info("FabricConnector producer: %d layers, address in %s", layout.num_layers,
                        address_file)
        else:
            self._receiver = fkv.Receiver(
                layout,
                self._kv_caches,
                spread=int(self._extra.get("spread", 0)),
                quarantine_ms=int(self._extra.get("quarantine_ms", 30000)),
                **engine,
            )
            deadline = time.monotonic() + float(self._extra.get("connect_timeout_s", 300))
            while not os.path.exists(address_file):  # the producer may still be loading
                if time.monotonic() > deadline:
                    raise TimeoutError(f"FabricConnector: no producer address in {address_file}")
                time.sleep(0.1)
            with open(address_file) as f:
                address = bytes.fromhex(f.read().strip())
            self._source = self._receiver.connect(address, 60.0)
            logger.info("FabricConnector consumer: connected to the producer")

    def _prepare(self, t: _Transfer) -> None:
        if t.req_id in self._saves:
            return
        assert self._sender is not None
        pages = t.block_ids[: -(-t.num_tokens // self._block_size)]
        self._sender.prepare(t.fabric_id, pages, len(pages))  # whole blocks (see _layout)
        self._saves[t.req_id] = t

    def start_load_kv(self, forward_context: ForwardContext, **kwargs: Any) -> None:
        # vLLM calls this after the forward when no load is synchronous, so the producer's
        # saves are prepared at their first save_kv_layer (or here, whichever comes first).
        meta = self._get_connector_metadata()
        assert isinstance(meta, FabricConnectorMetadata)
        if meta.saves or meta.loads:
            logger.info("FabricConnector step: %d saves, %d loads", len(meta.saves), len(meta.loads))
        if self._sender is not None:
            for t in meta.saves:
                self._prepare(t)
        if self._receiver is not None:
            for t in meta.loads:
                pages = t.block_ids[: -(-t.num_tokens // self._block_size)]
                # Whole blocks: slots past the loaded tokens are written here before they are
                # read (the last prompt token and every decoded one).
                expected = self._receiver.request(t.fabric_id, pages, len(pages), [self._source])
                logger.info("FabricConnector: asked for %s (%d tokens, %d pages, %d immediates)",
                            t.fabric_id, t.num_tokens, len(pages), expected)
                self._loads[t.req_id] = t

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
        for t in meta.saves:
            # The whole prompt runs in this step (one prefill chunk): write the layer now.
            self._prepare(t)
            self._sender.layer_done(t.fabric_id, layer)
        if layer == len(self._layer_index) - 1:
            logger.info("FabricConnector: last layer of %d requests computed", len(meta.saves))

    def wait_for_save(self) -> None:
        return  # writes complete in the background; request_finished held the blocks

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        sending: set[str] = set()
        recving: set[str] = set()
        if self._sender is not None:
            self._finished_seen |= finished_req_ids
            for req_id in list(self._saves):
                if req_id not in self._finished_seen:
                    continue
                t = self._saves[req_id]
                state, error = self._sender.poll(t.fabric_id)
                if state in fkv.TERMINAL:
                    if error:
                        logger.warning("FabricConnector: sending %s %s: %s", t.fabric_id, state,
                                       error)
                    self._sender.release(t.fabric_id)
                    del self._saves[req_id]
                    self._finished_seen.discard(req_id)
                    sending.add(req_id)
        if self._receiver is not None:
            for req_id in list(self._loads):
                t = self._loads[req_id]
                state, error = self._receiver.poll(t.fabric_id)
                if state not in fkv.TERMINAL:
                    continue
                logger.info("FabricConnector: %s %s", t.fabric_id, state)
                if state != "done":
                    logger.warning("FabricConnector: receiving %s %s: %s", t.fabric_id, state, error)
                    self._load_errors.update(t.block_ids)
                elif t.corrupt:
                    self._corrupt(t)
                self._receiver.release(t.fabric_id)
                del self._loads[req_id]
                recving.add(req_id)
        return sending or None, recving or None

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

