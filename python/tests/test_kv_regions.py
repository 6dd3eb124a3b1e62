"""fabric_lib.kv registers each region as the memory it is: a torch CUDA tensor as device memory
of its GPU (routed to that GPU's NICs), CPU tensors and numpy arrays as host memory. Without a
CUDA driver a CUDA region is refused with a FabricError naming the device, never a crash."""

from __future__ import annotations

import numpy as np
import pytest

import fabric_lib as fl
import fabric_lib.kv as fkv
from fabric_lib.kv import _region


class _FakeCudaTensor:
    """What _region reads of a torch CUDA tensor, without a GPU."""

    class _Device:
        type = "cuda"

        def __init__(self, index):
            self.index = index

    def __init__(self, index, nbytes=4096):
        self.device = self._Device(index)
        self._buf = np.zeros(nbytes, np.uint8)  # a real pointer, so the engine could register it

    def data_ptr(self):
        return self._buf.ctypes.data

    def is_contiguous(self):
        return True

    def numel(self):
        return self._buf.size

    def element_size(self):
        return 1


def test_a_cuda_tensor_is_a_region_of_its_gpu():
    t = _FakeCudaTensor(1)
    assert _region(t) == (t.data_ptr(), 4096, 1)
    assert _region(_FakeCudaTensor(None))[2] == 0  # torch.device("cuda") without an index


def test_host_memory_is_a_host_region():
    a = np.zeros(64, np.float32)
    assert _region(a) == (a.ctypes.data, 256, -1)
    torch = pytest.importorskip("torch")
    t = torch.zeros(16, dtype=torch.float32)
    assert _region(t) == (t.data_ptr(), 64, -1)


def test_a_cuda_region_without_a_cuda_driver_is_a_clear_error():
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is present: the GPU check script registers real CUDA KV regions")
    except ImportError:
        pass
    layout = fkv.vllm_cpu(1, 1, 1, 1, 0, 1, 1024, 4)  # one page: 8 KiB
    # The Sender registers its regions at once (a Receiver does per connected sender).
    with pytest.raises(fl.FabricError, match="(?i)cuda|device") as err:
        fkv.Sender(layout, [_FakeCudaTensor(0, nbytes=8192)])
    print(err.value)
