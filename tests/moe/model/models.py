"""Small random-weight transformers MoE models for the EP tests, and the routings they run under.

Built locally from a config (nothing downloaded). The weights are re-drawn at 1/sqrt(fan_in)
instead of transformers' 0.02, so that the experts' outputs move the residual stream as much as
attention does: with the default init the MoE layers hardly touch the logits, and a broken
dispatch could still produce the same tokens.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# name -> (config class, model class, block class, config arguments)
KINDS = {
    # Qwen3-MoE: 16 experts, top-4, no shared expert.
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", "Qwen3MoeSparseMoeBlock", "qwen3_moe",
                  dict(num_experts=16, num_experts_per_tok=4, norm_topk_prob=True, moe_intermediate_size=32,
                       head_dim=16)),
    # Qwen2-MoE: 8 experts, top-2, a gated shared expert beside the routed ones.
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM", "Qwen2MoeSparseMoeBlock", "qwen2_moe",
                  dict(num_experts=8, num_experts_per_tok=2, norm_topk_prob=False, moe_intermediate_size=32,
                       shared_expert_intermediate_size=48)),
}
VOCAB, HIDDEN, LAYERS = 256, 64, 4


def build(kind: str, seed: int = 0, hidden: int = HIDDEN, layers: int = LAYERS, **overrides):
    """(model, block class, num_experts, top_k): the same weights for every caller with `seed`.
    `overrides` replace the kind's MoE arguments (the benchmark's larger shapes)."""
    import importlib

    config_name, model_name, block_name, module, extra = KINDS[kind]
    extra = {**extra, **overrides}
    mod = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    cfg_mod = importlib.import_module(f"transformers.models.{module}.configuration_{module}")
    config = getattr(cfg_mod, config_name)(
        vocab_size=VOCAB, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, **extra)
    # The reference path: transformers' own loop over experts, which also skips id == E.
    config._experts_implementation = "eager"
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = getattr(mod, model_name)(config).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or p.dim() < 2:
                continue
            std = 1.0 if "embed_tokens" in name else 1.0 / math.sqrt(p.shape[-1])
            if name.endswith("gate.weight"):
                std *= 3.0  # router logits of a few units: varied, decisive top-k choices
            p.copy_(torch.randn(p.shape, generator=g) * std)
    return model, getattr(mod, block_name), extra["num_experts"], extra["num_experts_per_tok"]


class Routing(torch.nn.Module):
    """A router over the model's own router weights, with a twist applied to its choice.

    skew=(lo, hi): only experts [lo, hi) can be chosen (all tokens to one rank's experts).
    drop=True: some slots name no expert (id = num_experts, transformers' "none"), so tokens
    have fewer than top_k valid experts, some none at all. Installed in the reference model and
    in the EP model alike: the layer around it is the model's.
    """

    def __init__(self, gate: torch.nn.Module, num_experts: int, top_k: int, norm: bool,
                 skew: tuple[int, int] | None = None, drop: bool = False) -> None:
        super().__init__()
        self.weight = gate.weight
        self.num_experts, self.top_k, self.norm, self.skew, self.drop = num_experts, top_k, norm, skew, drop
        self.dropped = 0   # slots without an expert, over every call
        self.empty = 0     # tokens without any

    def forward(self, h: torch.Tensor):
        h = h.reshape(-1, self.weight.shape[1])
        logits = F.linear(h, self.weight)
        masked = logits
        if self.skew is not None:
            keep = torch.zeros(self.num_experts, dtype=torch.bool)
            keep[self.skew[0]:self.skew[1]] = True
            masked = logits.masked_fill(~keep, float("-inf"))
        probs = torch.softmax(masked.float(), dim=-1)
        weights, ids = torch.topk(probs, self.top_k, dim=-1)
        if self.norm:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        if self.drop:
            # Depends only on the choice, so every rank and the reference agree.
            # Some slots of most tokens; every slot of the tokens whose first choice is 0 mod 5.
            gone = ((ids[:, :1] + torch.arange(self.top_k)) % 3 == 0) | (ids[:, :1] % 5 == 0)
            ids = ids.masked_fill(gone, self.num_experts)
            self.dropped += int(gone.sum())
            self.empty += int(gone.all(dim=-1).sum())
        return logits, weights.to(logits.dtype), ids


def install_routing(model: torch.nn.Module, block_type: type, **kwargs) -> list[Routing]:
    routers = []
    for block in model.modules():
        if isinstance(block, block_type):
            block.gate = Routing(block.gate, **kwargs)
            routers.append(block.gate)
    return routers


def permute_experts(model: torch.nn.Module, block_type: type) -> None:
    """Expert e computes with expert e+1's weights: a token sent to the wrong expert."""
    with torch.no_grad():
        for block in model.modules():
            if isinstance(block, block_type):
                for p in (block.experts.gate_up_proj, block.experts.down_proj):
                    p.copy_(torch.roll(p, shifts=1, dims=0))


def prompts(rank: int, vocab: int = VOCAB) -> torch.Tensor:
    """Rank r's batch: 2 or 3 sequences of 3 + 2r tokens (uneven token counts per rank)."""
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randint(0, vocab, (2 + rank % 2, 3 + 2 * rank), generator=g)


def generate(model: torch.nn.Module, ids: torch.Tensor, new_tokens: int):
    """Greedy, exactly new_tokens steps on every rank (dispatch is collective); (tokens, logits)."""
    out = generate_more(model, ids, new_tokens)
    return out.sequences[:, ids.shape[1]:], torch.stack(out.scores)


def generate_more(model: torch.nn.Module, ids: torch.Tensor, new_tokens: int, past=None):
    """generate's output; with `past` (an earlier output's past_key_values) it continues the
    sequences `ids` from that cache: new_tokens forward passes either way."""
    with torch.no_grad():
        return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, do_sample=False, output_scores=True,
                              return_dict_in_generate=True, pad_token_id=0, past_key_values=past)


class Counting:
    """A transport (Buffer) that counts the rows this rank's experts received."""

    def __init__(self, buf) -> None:
        self.buf, self.rows = buf, 0
        self.num_experts, self.layout, self.num_local_experts = buf.num_experts, buf.layout, buf.num_local_experts

    def dispatch(self, x, ids, weights):
        recv_x, recv_count, handle = self.buf.dispatch(x, ids, weights)
        self.rows += int(recv_count.sum())
        return recv_x, recv_count, handle

    def combine(self, y, handle, out=None):
        return self.buf.combine(y, handle, out=out)
