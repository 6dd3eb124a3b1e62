"""fabric_lib.moe: MoE dispatch/combine over the TransferEngine, shaped like DeepEP's low-latency calls.

    buf = Buffer(rank, world_size, num_experts=64, hidden=7168, num_max_dispatch_tokens_per_rank=128,
                 top_k=8, store=torch_store)
    recv_x, recv_count, handle = buf.dispatch(x, topk_idx)           # tokens for my local experts
    y = my_experts(recv_x, recv_count, handle)                        # rows grouped by local expert
    out = buf.combine(y, handle, topk_weights)                        # weighted sum, FP32, k in order

    # a transformers MoE model with its experts spread over the ranks (ExpertParallelMoe)
    expert_parallel(model, buf, Qwen3MoeSparseMoeBlock)

The protocol, buffer sizing and failure semantics are in docs/moe.md.
"""

from __future__ import annotations

from ._buffer import Buffer, Handle
from ._store import store_all_gather

__all__ = ["Buffer", "ExpertParallelMoe", "FabricPrepareAndFinalize", "Handle", "expert_parallel",
           "store_all_gather"]


def __getattr__(name: str):
    # The transformers block needs torch; Buffer alone does not.
    if name in ("ExpertParallelMoe", "expert_parallel"):
        from . import _ep_block

        return getattr(_ep_block, name)
    if name == "FabricPrepareAndFinalize":  # vLLM's EP slot: needs vllm
        from ._vllm_slot import FabricPrepareAndFinalize

        return FabricPrepareAndFinalize
    raise AttributeError(name)
