"""fabric_lib.moe.Buffer's contract on one rank: the tensors it returns are views (zero copy) with
the documented lifetime, combine writes where it is told, and bad input is a clear
InvalidArgumentError that touches nothing (the same Buffer then runs a good iteration). The
other ranks' side of bad input is in test_moe_bad_input.py."""

from __future__ import annotations

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fabric_lib  # noqa: E402
from fabric_lib.moe import Buffer  # noqa: E402

E, H, T, R = 4, 24, 8, 2


@pytest.fixture
def buf():
    # A group of one: every token stays here, so one process checks the whole path.
    b = Buffer(0, 1, E, H, T, R, all_gather=lambda blob: [blob], x_dtype="f32", combine_dtype="f32",
               out_dtype="f32", timeout_ms=5000)
    yield b
    b.close()


def _inputs(seed: int, tokens: int = 5):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, H, generator=g)
    ids = torch.stack([torch.randperm(E, generator=g)[:R] for _ in range(tokens)])
    ids[0, 1] = -1  # a token with fewer than k experts
    w = torch.rand(tokens, R, generator=g)
    return x, ids, w


def _expected(x, ids, w):
    """Each expert multiplies by (1 + e); the weighted sum over k in order, in FP32."""
    out = torch.zeros_like(x)
    for k in range(R):
        for t in range(x.shape[0]):
            if ids[t, k] >= 0:
                out[t] = out[t] + w[t, k] * (x[t] * (1 + int(ids[t, k])))
    return out


def _experts(buf, recv_x, handle):
    y = torch.zeros_like(recv_x)
    for e, rows in enumerate(buf.expert_rows(recv_x, handle)):
        b = handle.expert_begin[e]
        y[b:b + rows.shape[0]] = rows * (1 + e)
    return y


def _iteration(buf, seed: int, out=None):
    x, ids, w = _inputs(seed)
    recv_x, _, handle = buf.dispatch(x, ids, w)
    result = buf.combine(_experts(buf, recv_x, handle), handle, out=out)
    assert torch.equal(result, _expected(x, ids, w))
    return result


def test_dispatch_returns_views_of_the_receive_tensor_valid_until_the_next_dispatch(buf) -> None:
    x1, ids1, w1 = _inputs(1)
    recv1, count1, h1 = buf.dispatch(x1, ids1, w1)
    assert recv1.data_ptr() == buf._recv_x.ctypes.data  # no copy: the Buffer's own receive tensor
    assert count1.data_ptr() == buf._recv_count.ctypes.data
    rows_e0 = recv1[h1.expert_begin[0]:h1.expert_begin[0] + int(count1[0])].clone()
    assert torch.equal(rows_e0, x1[(ids1 == 0).any(dim=1)])
    buf.combine(_experts(buf, recv1, h1), h1)
    x2, ids2, w2 = _inputs(2)
    recv2, count2, h2 = buf.dispatch(x2, ids2, w2)
    assert recv2.data_ptr() == recv1.data_ptr()
    # The first view now shows the second dispatch's tokens: valid until the next dispatch.
    assert torch.equal(recv1[h2.expert_begin[0]:h2.expert_begin[0] + int(count2[0])], x2[(ids2 == 0).any(dim=1)])
    buf.combine(_experts(buf, recv2, h2), h2)


def test_combine_writes_into_the_given_tensor_or_returns_a_view(buf) -> None:
    out = torch.full((5, H), float("nan"))
    result = _iteration(buf, 3, out=out)
    assert result is out
    view = _iteration(buf, 4)
    assert view.data_ptr() == buf._out.ctypes.data
    assert torch.equal(out, _iteration(buf, 3))  # the given tensor kept its result


@pytest.mark.parametrize("case,message", [
    ("expert out of range", "topk_idx[1][0] = 4 is not an expert"),
    ("expert twice", "names expert"),
    ("too many tokens", "more than num_max_dispatch_tokens_per_rank 8"),
    ("wrong dtype", "x is torch.bfloat16, this Buffer takes torch.float32"),
    ("wrong hidden", "[5, 25], [n, 24] needed"),
    ("float ids", "topk_idx must hold integers"),
    ("ids shape", "topk_idx is [5, 3], [5, 2] (tokens, top_k) needed"),
])
def test_bad_dispatch_input_is_refused_before_anything_is_sent(buf, case: str, message: str) -> None:
    x, ids, w = _inputs(5)
    if case == "expert out of range":
        ids[1, 0] = E
    elif case == "expert twice":
        ids[2, 1] = ids[2, 0]
    elif case == "too many tokens":
        x, ids, w = _inputs(5, tokens=T + 1)
    elif case == "wrong dtype":
        x = x.to(torch.bfloat16)
    elif case == "wrong hidden":
        x = torch.randn(5, H + 1)
    elif case == "float ids":
        ids = ids.float()
    elif case == "ids shape":
        ids = torch.zeros(5, R + 1, dtype=torch.int64)
    with pytest.raises(fabric_lib.InvalidArgumentError, match=re.escape(message)):
        buf.dispatch(x, ids, w)
    _iteration(buf, 6)  # nothing was lost


def test_combine_without_its_dispatch_is_refused(buf) -> None:
    x, ids, w = _inputs(7)
    recv_x, _, h1 = buf.dispatch(x, ids, w)
    y = _experts(buf, recv_x, h1)
    buf.combine(y, h1)
    with pytest.raises(fabric_lib.InvalidArgumentError, match="no dispatch to combine"):
        buf.combine(y, h1)  # combined already
    recv_x, _, h2, hook = buf.dispatch(x, ids, w, return_recv_hook=True)
    with pytest.raises(fabric_lib.InvalidArgumentError, match="receive hook has not run"):
        buf.combine(y, h2)
    hook()
    with pytest.raises(fabric_lib.InvalidArgumentError, match="the handle is of dispatch 1, the dispatch in progress is 2"):
        buf.combine(y, h1)
    with pytest.raises(fabric_lib.InvalidArgumentError, match="dispatch 2 is not combined yet"):
        buf.dispatch(x, ids, w)
    with pytest.raises(fabric_lib.InvalidArgumentError, match="x is torch.bfloat16"):
        buf.combine(y.to(torch.bfloat16), h2)
    with pytest.raises(fabric_lib.InvalidArgumentError, match="out has 4 rows, 5 needed"):
        buf.combine(y, h2, out=torch.empty(4, H))
    with pytest.raises(fabric_lib.InvalidArgumentError, match="out must be contiguous"):
        buf.combine(y, h2, out=torch.empty(H, 5).t())
    out = buf.combine(_experts(buf, recv_x, h2), h2)
    assert torch.equal(out, _expected(x, ids, w))
    _iteration(buf, 8)


def test_numpy_input_is_checked_too(buf) -> None:
    x, ids, w = _inputs(9)
    with pytest.raises(fabric_lib.InvalidArgumentError, match="x is float64"):
        buf.dispatch(x.double().numpy(), ids.numpy(), w.numpy())
    recv_x, _, handle = buf.dispatch(x.numpy(), ids.numpy(), w.numpy())
    assert isinstance(recv_x, np.ndarray) and recv_x.dtype == np.float32
    buf.combine(_experts(buf, torch.from_numpy(recv_x), handle).numpy(), handle)
