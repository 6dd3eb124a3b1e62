"""FabricPrepareAndFinalize: vLLM's expert-parallel prepare/finalize slot on fabric_lib.moe.

vLLM's modular fused-MoE kernel (`FusedMoEKernel`) is a prepare/finalize object (the all-to-all)
around an experts object (the GEMMs). This one is the all-to-all, in vLLM's Standard activation
format (tokens x hidden), shaped as DeepEP's high-throughput one:

- prepare sends each token once to every rank that hosts one of its experts, with its top-k ids
  and weights riding along as FP32 scales, and returns the tokens that arrived here (a view of
  the Buffer's receive tensor) with their ids made local. Entries of experts elsewhere become
  local expert 0 with weight 0: vLLM's CPU experts kernel takes no -1.
- the experts (any Standard-format experts object; vLLM's CPU ones apply the weights and sum
  over k) produce one partial row per received token;
- finalize sends the partial rows back and sums them per token (weight 1 each, ranks in order)
  straight into vLLM's output tensor.

Internally the Buffer sees one pseudo-expert per rank (top_k = world size), so a token crosses
once per destination rank and one row per (token, rank) comes back. Rank r hosts the experts
[r*E/N, (r+1)*E/N) and is given those experts' weights. Limits: world size <= 16 (the Buffer's
top_k), unquantized activations, apply_router_weight_on_input not supported. prepare_async and
finalize_async return (hook, receiver) pairs: the send half has run when they return.
"""

from __future__ import annotations

from typing import Any

import torch
import vllm.model_executor.layers.fused_moe.modular_kernel as mk
from vllm.model_executor.layers.fused_moe.topk_weight_and_reduce import (
    TopKWeightAndReduceContiguous,
    TopKWeightAndReduceDelegate,
    TopKWeightAndReduceNoOP,
)

from .. import InvalidArgumentError, UnsupportedError
from ._buffer import Buffer

_DTYPES = {torch.float32: "f32", torch.bfloat16: "bf16"}


class FabricPrepareAndFinalize(mk.FusedMoEPrepareAndFinalizeModular):
    def __init__(self, rank: int, world_size: int, num_experts: int, hidden: int, max_num_tokens: int,
                 top_k: int, *, dtype: torch.dtype = torch.bfloat16, **buffer_kwargs: Any) -> None:
        super().__init__()
        if dtype not in _DTYPES:
            raise InvalidArgumentError(f"dtype must be torch.float32 or torch.bfloat16, not {dtype}")
        if world_size > 16:
            raise UnsupportedError(f"FabricPrepareAndFinalize handles at most 16 ranks, not {world_size}")
        self.rank, self.world_size, self.num_experts, self.top_k = rank, world_size, num_experts, top_k
        self.max_num_tokens, self.dtype = max_num_tokens, dtype
        self.bounds = torch.tensor([r * num_experts // world_size for r in range(world_size + 1)])
        self.first_expert = int(self.bounds[rank])
        self.num_local_experts = int(self.bounds[rank + 1]) - self.first_expert
        kind = _DTYPES[dtype]
        self.buffer = Buffer(rank, world_size, world_size, hidden, max_num_tokens, world_size,
                             x_dtype=kind, combine_dtype=kind, out_dtype=kind, num_scales=2 * top_k,
                             **buffer_kwargs)
        self._y = torch.zeros(self.buffer.layout["recv_rows"], hidden, dtype=dtype)
        self._handle = None

    # -- what the modular kernel asks ---------------------------------------------------------

    @property
    def activation_format(self) -> mk.FusedMoEActivationFormat:
        return mk.FusedMoEActivationFormat.Standard

    def topk_indices_dtype(self) -> torch.dtype | None:
        return None

    def max_num_tokens_per_rank(self) -> int | None:
        return self.max_num_tokens

    def num_dispatchers(self) -> int:
        return self.world_size

    def output_is_reduced(self) -> bool:
        return True  # every expert's contribution is in each token's row after finalize

    # -- the all-to-all ------------------------------------------------------------------------

    def supports_async(self) -> bool:
        return True

    def prepare(self, a1: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor, num_experts: int,
                expert_map: torch.Tensor | None, apply_router_weight_on_input: bool, quant_config: Any,
                defer_input_quant: bool = False) -> mk.PrepareResultType:
        hook, receiver = self.prepare_async(a1, topk_weights, topk_ids, num_experts, expert_map,
                                            apply_router_weight_on_input, quant_config, defer_input_quant)
        hook()
        return receiver()

    def prepare_async(self, a1: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor,
                      num_experts: int, expert_map: torch.Tensor | None, apply_router_weight_on_input: bool,
                      quant_config: Any, defer_input_quant: bool = False):
        """Sends the tokens and returns (hook, receiver): hook() waits for this rank's tokens,
        receiver() then returns what prepare does. The caller may work between the two."""
        if apply_router_weight_on_input:
            raise UnsupportedError("FabricPrepareAndFinalize: apply_router_weight_on_input is not supported")
        if getattr(quant_config, "quant_dtype", None) is not None:
            raise UnsupportedError("FabricPrepareAndFinalize moves unquantized activations only")
        if num_experts != self.num_experts:
            raise InvalidArgumentError(f"the layer has {num_experts} experts, this slot {self.num_experts}")
        ids = topk_ids.long()
        if ids.numel() and (ids.min() < 0 or ids.max() >= num_experts):
            raise InvalidArgumentError(f"topk_ids must lie in [0, {num_experts}), not "
                                       f"[{int(ids.min())}, {int(ids.max())}]")
        owner = torch.bucketize(ids, self.bounds[1:], right=True)                    # [T, k]
        ranks = torch.arange(self.world_size)
        to = (owner.unsqueeze(-1) == ranks).any(dim=1)                              # [T, N]
        dest = torch.where(to, ranks, torch.full_like(to, -1, dtype=torch.long))
        # The token's own routing rides along: its ids (exact in FP32) and weights.
        scales = torch.cat([ids.float(), topk_weights.float()], dim=1)
        recv_x, recv_count, handle, hook = self.buffer.dispatch(a1, dest, to.float(), scales=scales,
                                                                return_recv_hook=True)
        self._handle = handle

        def receiver() -> mk.PrepareResultType:
            hook()  # a no-op once run
            m = int(recv_count[0])   # one pseudo-expert per rank: every row is "expert 0"
            got = torch.from_numpy(self.buffer.recv_scales()[:m])
            local = got[:, :self.top_k].long() - self.first_expert
            mine = (local >= 0) & (local < self.num_local_experts)
            local_ids = torch.where(mine, local, torch.zeros_like(local)).to(torch.int32)
            local_w = torch.where(mine, got[:, self.top_k:], torch.zeros_like(local, dtype=torch.float32))
            return recv_x[:m], None, None, local_ids, local_w.to(topk_weights.dtype)

        return hook, receiver

    def finalize(self, output: torch.Tensor, fused_expert_output: torch.Tensor, topk_weights: torch.Tensor,
                 topk_ids: torch.Tensor, apply_router_weight_on_input: bool,
                 weight_and_reduce_impl: mk.TopKWeightAndReduce) -> None:
        hook, receiver = self.finalize_async(output, fused_expert_output, topk_weights, topk_ids,
                                             apply_router_weight_on_input, weight_and_reduce_impl)
        hook()
        receiver()

    def finalize_async(self, output: torch.Tensor, fused_expert_output: torch.Tensor, topk_weights: torch.Tensor,
                       topk_ids: torch.Tensor, apply_router_weight_on_input: bool,
                       weight_and_reduce_impl: mk.TopKWeightAndReduce):
        """Sends the partial rows and returns (hook, receiver): output is valid once hook()
        (which waits and sums into it) has run; receiver() is then a no-op."""
        handle, self._handle = self._handle, None
        if handle is None:
            raise InvalidArgumentError("FabricPrepareAndFinalize: finalize without its prepare")
        m = fused_expert_output.shape[0]
        rows = self._y[:m]
        if isinstance(weight_and_reduce_impl, TopKWeightAndReduceNoOP):
            if fused_expert_output.data_ptr() != rows.data_ptr():
                rows.copy_(fused_expert_output.reshape(m, -1))
        else:
            # Experts that left the weighting to us: reduce this rank's k locally first.
            if isinstance(weight_and_reduce_impl, TopKWeightAndReduceDelegate):
                weight_and_reduce_impl = TopKWeightAndReduceContiguous()
            weight_and_reduce_impl.apply(output=rows, fused_expert_output=fused_expert_output,
                                         topk_weights=topk_weights, topk_ids=topk_ids,
                                         apply_router_weight_on_input=False)
        _, hook = self.buffer.combine(self._y, handle, out=output, return_recv_hook=True)
        return hook, lambda: hook()

    def close(self) -> None:
        self.buffer.close()
