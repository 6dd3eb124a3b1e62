"""fabric_lib.moe: MoE dispatch/combine over the TransferEngine, shaped like DeepEP's low-latency calls.

    buf = Buffer(rank, world_size, num_experts=64, hidden=7168, num_max_dispatch_tokens_per_rank=128,
                 top_k=8, store=torch_store)
    recv_x, recv_count, handle = buf.dispatch(x, topk_idx)           # tokens for my local experts
    y = my_experts(recv_x, recv_count, handle)                        # rows grouped by local expert
    out = buf.combine(y, handle, topk_weights)                        # weighted sum, FP32, k in order

The protocol, buffer sizing and failure semantics are in docs/moe.md.
"""

from __future__ import annotations

from ._buffer import Buffer, Handle
from ._store import store_all_gather

__all__ = ["Buffer", "Handle", "store_all_gather"]
