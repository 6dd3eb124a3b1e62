"""GlooEp: the transport fabric_lib.moe.ExpertParallelMoe uses, over torch.distributed all_to_all
(gloo), for the model benchmark's counterpart (tools/moe/model_bench.py).

The same contract and the same arithmetic as fabric_lib.moe.Buffer: each token travels once
per destination rank, each (token, k) expert row comes back, rows reach the experts grouped by
local expert, and the weighted sum runs in FP32 with k in order (so both give the same tokens).
Rank r hosts the experts [r*E/N, (r+1)*E/N), as fabric's placement does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class GlooHandle:
    tokens: int
    top_k: int
    expert_begin: list[int]
    weights: torch.Tensor        # [T, k] float32
    send_tokens: list[torch.Tensor]  # per destination: the tokens sent there, in token order
    send_pairs: list[torch.Tensor]   # per destination: (i, k) rows it returns, i into send_tokens
    recv_pairs: torch.Tensor     # per received token: its local expert per k, or -1
    recv_split: list[int]        # received tokens per source
    grouped: torch.Tensor        # grouped row -> index into the (token, k) rows returned


class GlooEp:
    def __init__(self, rank: int, world: int, num_experts: int, hidden: int) -> None:
        self.rank, self.world, self.num_experts, self.hidden = rank, world, num_experts, hidden
        self.bounds = torch.tensor([r * num_experts // world for r in range(world + 1)])
        first, end = int(self.bounds[rank]), int(self.bounds[rank + 1])
        self.layout = {"first_expert": first}
        self.num_local_experts = end - first

    def _owner(self, ids: torch.Tensor) -> torch.Tensor:
        owner = torch.bucketize(ids.clamp(min=0), self.bounds[1:], right=True)
        return torch.where(ids >= 0, owner, torch.full_like(owner, -1))

    def _exchange(self, send: torch.Tensor, send_split: list[int], recv_split: list[int]) -> torch.Tensor:
        recv = torch.empty((sum(recv_split),) + tuple(send.shape[1:]), dtype=send.dtype)
        dist.all_to_all_single(recv, send.contiguous(), recv_split, send_split)
        return recv

    def dispatch(self, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor):
        ids = ids.long()
        owner = self._owner(ids)
        tokens, top_k = ids.shape
        dests = [torch.nonzero((owner == d).any(dim=1)).flatten() for d in range(self.world)]
        send_split = [len(t) for t in dests]
        counts = torch.tensor(send_split, dtype=torch.int64)
        recv_counts = torch.empty(self.world, dtype=torch.int64)
        dist.all_to_all_single(recv_counts, counts)
        recv_split = recv_counts.tolist()
        # Tokens, and with each its local expert per k on that destination (-1 elsewhere).
        local = [torch.where(owner[t] == d, ids[t] - self.bounds[d], torch.full_like(ids[t], -1))
                 for d, t in enumerate(dests)]
        recv_x = self._exchange(torch.cat([x[t] for t in dests]), send_split, recv_split)
        recv_ids = self._exchange(torch.cat(local), send_split, recv_split)
        # Rows returned per (received token, k) in token then k order; grouped by local expert.
        pairs = torch.nonzero(recv_ids >= 0)                       # [(j, k)] in j then k order
        expert = recv_ids[pairs[:, 0], pairs[:, 1]]
        order = torch.sort(expert, stable=True).indices              # by expert, then (source, token)
        count = torch.bincount(expert, minlength=self.num_local_experts)
        begin = torch.cumsum(count, 0) - count
        grouped_x = recv_x[pairs[order, 0]]
        handle = GlooHandle(tokens, top_k, begin.tolist(), weights.float(), dests,
                            [torch.nonzero(owner[t] == d) for d, t in enumerate(dests)],
                            pairs, recv_split, order)
        return grouped_x, count.to(torch.int32), handle

    def combine(self, y: torch.Tensor, handle: GlooHandle, out: torch.Tensor | None = None) -> torch.Tensor:
        rows = torch.empty_like(y[: len(handle.grouped)])
        rows[handle.grouped] = y[: len(handle.grouped)]                     # back to (j, k) order
        per_source = torch.bincount(handle.recv_pairs[:, 0], minlength=sum(handle.recv_split))
        back_split = [int(s.sum()) for s in torch.split(per_source, handle.recv_split)]
        mine_split = [len(p) for p in handle.send_pairs]
        back = self._exchange(rows, back_split, mine_split)
        # Row for (t, k): from destination d, in the order d sent them: its tokens, then k.
        gathered = torch.zeros(handle.tokens, handle.top_k, y.shape[1], dtype=y.dtype)
        start = 0
        for d, (t, p) in enumerate(zip(handle.send_tokens, handle.send_pairs)):
            tok = t[p[:, 0]]
            gathered[tok, p[:, 1]] = back[start:start + len(p)]
            start += len(p)
        acc = torch.zeros(handle.tokens, y.shape[1], dtype=torch.float32)
        for k in range(handle.top_k):  # k in order, each product and sum rounded: fabric's sum
            acc = acc + handle.weights[:, k:k + 1] * gathered[:, k].float()
        if out is None:
            return acc
        out.copy_(acc)
        return out
