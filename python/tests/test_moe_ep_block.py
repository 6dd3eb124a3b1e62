"""fabric_lib.moe.ExpertParallelMoe on a group of one, without transformers: a block shaped as
transformers 5 stores its experts (router returning logits, weights, ids; experts.gate_up_proj
and down_proj), against the same block computed by hand, under placements the caller picks.
The multi-process model runs are ctest moe.model_ep (tests/moe/model)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import fabric_lib  # noqa: E402
from fabric_lib.moe import Buffer, ExpertParallelMoe  # noqa: E402

E, H, I, K, T = 6, 16, 8, 2, 5


class Router(torch.nn.Module):
    def __init__(self, weight, none_slot: bool) -> None:
        super().__init__()
        self.weight, self.none_slot = torch.nn.Parameter(weight), none_slot

    def forward(self, h):
        logits = h @ self.weight.t()
        w, ids = torch.topk(torch.softmax(logits, dim=-1), K)
        if self.none_slot:
            ids[0, 1] = E  # transformers' "no expert"
        return logits, w, ids


class Experts(torch.nn.Module):
    def __init__(self, g) -> None:
        super().__init__()
        self.num_experts = E
        self.gate_up_proj = torch.nn.Parameter(torch.randn(E, 2 * I, H, generator=g) / 4)
        self.down_proj = torch.nn.Parameter(torch.randn(E, H, I, generator=g) / 3)
        self.act_fn = torch.nn.functional.silu


class Block(torch.nn.Module):
    def __init__(self, none_slot: bool = False) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.gate = Router(torch.randn(E, H, generator=g), none_slot)
        self.experts = Experts(g)

    def reference(self, h):
        _, w, ids = self.gate(h)
        out = torch.zeros_like(h)
        for t in range(h.shape[0]):
            for k in range(K):
                e = int(ids[t, k])
                if e == E:
                    continue
                gate, up = (h[t] @ self.experts.gate_up_proj[e].t()).chunk(2)
                out[t] = out[t] + w[t, k] * ((self.experts.act_fn(gate) * up) @ self.experts.down_proj[e].t())
        return out


@pytest.fixture
def buf():
    b = Buffer(0, 1, E, H, T, K, all_gather=lambda blob: [blob], x_dtype="f32", combine_dtype="f32",
               out_dtype="f32", timeout_ms=5000)
    yield b
    b.close()


def test_a_bf16_model_on_a_buffer_that_sums_in_f32_and_returns_bf16() -> None:
    b = Buffer(0, 1, E, H, T, K, all_gather=lambda blob: [blob], x_dtype="bf16", combine_dtype="f32",
               out_dtype="bf16", timeout_ms=5000)
    try:
        block = Block().to(torch.bfloat16)
        h = torch.randn(1, T, H, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
        with torch.no_grad():
            got = ExpertParallelMoe(block, b)(h)
            want = Block().reference(h[0].float())  # fp32 weights and math
        assert got.dtype == torch.bfloat16
        assert (got[0].float() - want).abs().max() <= 2.0 ** -5 * want.abs().max()
    finally:
        b.close()


@pytest.mark.parametrize("placement", [None, [5, 4, 3, 2, 1, 0], [2, 0, 1, 5, 3, 4]])
def test_the_block_equals_the_hand_computed_one_under_any_placement(buf, placement) -> None:
    block = Block(none_slot=True)
    h = torch.randn(1, T, H, generator=torch.Generator().manual_seed(4))
    ep = ExpertParallelMoe(block, buf, placement)
    with torch.no_grad():
        got = ep(h)
        want = block.reference(h[0])
    assert got.shape == h.shape
    assert torch.allclose(got[0], want, atol=1e-5, rtol=1e-5), (got[0] - want).abs().max()


def test_a_placement_that_is_no_permutation_is_refused(buf) -> None:
    with pytest.raises(fabric_lib.InvalidArgumentError, match="placement must be a permutation"):
        ExpertParallelMoe(Block(), buf, [0, 0, 1, 2, 3, 4])


def test_a_transport_with_another_expert_count_is_refused() -> None:
    other = Buffer(0, 1, E + 2, H, T, K, all_gather=lambda blob: [blob], x_dtype="f32",
                   combine_dtype="f32", out_dtype="f32", timeout_ms=5000)
    try:
        with pytest.raises(fabric_lib.InvalidArgumentError, match="the block has 6 experts, the transport 8"):
            ExpertParallelMoe(Block(), other)
    finally:
        other.close()
