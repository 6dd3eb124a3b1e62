"""ExpertParallelMoe: a transformers sparse-MoE block whose routed experts live on several ranks.

The block keeps the model's own router (`block.gate`, which returns logits, top-k weights and
top-k ids) and its shared expert if it has one; only the routed experts change: this rank keeps
the weights of the experts it hosts (a contiguous block of slots, and the caller's placement of
experts in slots), and tokens reach them through a transport's `dispatch`
and come back, weighted, through its `combine` (fabric_lib.moe.Buffer, or any object with the
same three calls). It fits the blocks whose experts are stored as transformers 5 does it
(Qwen2-MoE, Qwen3-MoE, Mixtral, ...): `experts.gate_up_proj` [E, 2I, H], `experts.down_proj`
[E, H, I], `experts.act_fn`.

Every rank of the group must call forward the same number of times (dispatch is collective);
ranks may pass different numbers of tokens, each at most the transport's max_tokens.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .. import InvalidArgumentError


class ExpertParallelMoe(torch.nn.Module):
    """Replaces `block` (a sparse-MoE block) on one rank of an expert-parallel group."""

    def __init__(self, block: torch.nn.Module, transport: Any, placement: Any = None) -> None:
        super().__init__()
        experts = block.experts
        self.num_experts = int(experts.num_experts)
        self.gate = block.gate
        self.act_fn = experts.act_fn
        # Qwen2-MoE's shared expert runs here, on this rank's own tokens, as in the model.
        self.shared_expert = getattr(block, "shared_expert", None)
        self.shared_expert_gate = getattr(block, "shared_expert_gate", None)
        self.reshard(transport, experts.gate_up_proj, experts.down_proj, placement)

    def reshard(self, transport: Any, gate_up_proj: torch.Tensor, down_proj: torch.Tensor,
                placement: Any = None) -> None:
        """Moves the block onto `transport` (a group that ranks joined or left), with this rank's
        experts taken from the full [E, ...] weights.

        placement[e] is the slot of the model's expert e (a permutation of range(E); None keeps
        e in slot e). The transport gives each rank a contiguous block of slots, so the caller
        decides which experts a rank hosts by where it puts them. The next forward runs on the
        new group; the caller closes the old one once every rank switched.
        """
        n = self.num_experts
        if getattr(transport, "num_experts", n) != n:
            raise InvalidArgumentError(f"the block has {n} experts, the transport {transport.num_experts}")
        slots = list(range(n)) if placement is None else [int(s) for s in placement]
        if sorted(slots) != list(range(n)):
            raise InvalidArgumentError(f"placement must be a permutation of range({n}), not {slots}")
        first = int(transport.layout["first_expert"])
        local = int(transport.num_local_experts)
        expert_in_slot = [0] * n
        for e, s in enumerate(slots):
            expert_in_slot[s] = e
        mine = torch.tensor(expert_in_slot[first:first + local], dtype=torch.long)
        self.slot_of = torch.tensor(slots, dtype=torch.long)  # router id -> slot
        self.first_expert, self.local_experts = first, local
        # This rank's experts only; a real deployment would load just these.
        self.gate_up_proj = torch.nn.Parameter(gate_up_proj.detach()[mine].clone(), requires_grad=False)
        self.down_proj = torch.nn.Parameter(down_proj.detach()[mine].clone(), requires_grad=False)
        self.transport = transport
        dtypes = {"bf16": torch.bfloat16, "f32": torch.float32}
        self._y_dtype = dtypes[getattr(transport, "combine_dtype", "f32")]
        self._out_dtype = dtypes[getattr(transport, "out_dtype", "f32")]

    def _experts(self, recv_x: torch.Tensor, counts: list[int], begins: list[int]) -> torch.Tensor:
        """The local experts' outputs, row for row in recv_x's grouped order (SwiGLU as the model)."""
        # Rows of no expert (padding, unused) are never read by combine.
        y = torch.empty(recv_x.shape, dtype=self._y_dtype)
        for e, (b, c) in enumerate(zip(begins, counts)):
            if c == 0:
                continue
            gate, up = F.linear(recv_x[b:b + c], self.gate_up_proj[e]).chunk(2, dim=-1)
            y[b:b + c] = F.linear(self.act_fn(gate) * up, self.down_proj[e])
        return y

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        shape = hidden_states.shape
        h = hidden_states.reshape(-1, shape[-1])
        _, weights, ids = self.gate(h)
        # transformers' experts treat id == num_experts as "no expert" (its one-hot's extra
        # class); the transport skips -1. Ids out of [-1, E] stay out of range: the transport
        # refuses them.
        n = self.num_experts
        valid = (ids >= 0) & (ids < n)
        ids = torch.where(valid, self.slot_of[ids.clamp(0, n - 1)], ids)
        ids = torch.where(ids == n, torch.full_like(ids, -1), ids)  # slots are < n: only "none" is n
        recv_x, recv_count, handle = self.transport.dispatch(h, ids, weights)
        y = self._experts(recv_x, [int(c) for c in recv_count.tolist()], list(handle.expert_begin))
        # A fresh tensor: the block's output outlives the next layer's combine.
        out = torch.empty(h.shape, dtype=self._out_dtype)
        out = self.transport.combine(y, handle, out=out)
        out = out.to(hidden_states.dtype)
        if self.shared_expert is not None:
            shared = self.shared_expert(h)
            if self.shared_expert_gate is not None:
                shared = torch.sigmoid(self.shared_expert_gate(h)) * shared
            out = out + shared
        return out.reshape(shape)


def expert_parallel(model: torch.nn.Module, transport: Any, block_type: type, placement: Any = None) -> int:
    """Replaces every `block_type` module of `model` by an ExpertParallelMoe on `transport`
    (placement as in ExpertParallelMoe.reshard).

    Returns how many were replaced. All blocks share the transport: each call's results are
    consumed before the next layer dispatches.
    """
    targets = [(name, m) for name, m in model.named_modules() if isinstance(m, block_type)]
    for name, block in targets:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, ExpertParallelMoe(block, transport, placement))
    return len(targets)
