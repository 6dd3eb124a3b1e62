"""torch tensors: registration, every write between processes, and a torch.distributed (gloo)
job that swaps addresses and descriptors through the process group's store."""

from __future__ import annotations

import socket

import pytest

torch = pytest.importorskip("torch")

import fabric_lib as fl  # noqa: E402
import peers  # noqa: E402
from peers import STEP_S, Peer  # noqa: E402


@pytest.mark.parametrize("kind", ["torch", "torch-float32"])
@pytest.mark.parametrize("op", ["single", "single_offsets", "paged", "imm"])
def test_torch_tensors_between_processes(provider: str, kind: str, op: str) -> None:
    peers.run_write_case(provider, kind, op)


def test_tensor_registration() -> None:
    with fl.Engine("shm") as e:
        t = torch.arange(1024, dtype=torch.float64)
        handle, desc = e.reg_mr(t)
        assert handle.obj is t and handle.ptr == t.data_ptr()
        assert handle.size == desc.size == t.numel() * t.element_size()
        assert handle.device == "cpu"
        with pytest.raises(fl.InvalidArgumentError, match="contiguous"):
            e.reg_mr(torch.zeros(8, 8).t())
        with pytest.raises(fl.InvalidArgumentError, match="length and device"):
            e.reg_mr(t, 16)
        with pytest.raises(fl.InvalidArgumentError):
            e.reg_mr(torch.zeros(0))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torch_distributed_gloo_exchange_then_one_sided_writes(provider: str) -> None:
    port = _free_port()
    ranks = [
        Peer(peers.dist_rank, rank=r, world_size=2, port=port, provider=provider) for r in range(2)
    ]
    try:
        for p in ranks:
            assert p.recv(timeout=120) == "ok"
    finally:
        for p in ranks:
            p.close()
