"""fabric_lib.kv resolves its regions as Engine.reg_mr does (one resolver, python/src/memory.cpp):
a torch CUDA tensor is device memory of its GPU, CPU tensors, numpy arrays and other writable
buffers are host memory, a (ptr, length[, device]) tuple is raw memory; what reg_mr refuses KV
refuses with the same exception classes. A Sender or Receiver keeps its regions alive until
close(). Without a CUDA driver a CUDA region is refused with a FabricError naming the device,
never a crash."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import fabric_lib as fl
import fabric_lib.kv as fkv

# One layer, one page of one token of one 1024-element head, K and V of float32: one 8 KiB region.
REGION_BYTES = 8192


def layout() -> fkv.Layout:
    return fkv.vllm_cpu(1, 1, 1, 1, 0, 1, 1024, 4)


class _FakeCudaTensor:
    """What the resolver reads of a torch CUDA tensor, without a GPU."""

    class _Device:
        type = "cuda"

        def __init__(self, index):
            self.index = index

        def __str__(self):  # as torch.device prints
            return "cuda" if self.index is None else f"cuda:{self.index}"

    def __init__(self, index, nbytes=REGION_BYTES):
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


def _no_gpu() -> None:
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is present: the GPU check script registers real CUDA KV regions")
    except ImportError:
        pass


@pytest.mark.parametrize("index,device", [(1, "cuda:1"), (None, "cuda:0")])
def test_a_cuda_tensor_is_a_region_of_its_gpu(index, device):
    _no_gpu()
    # The Sender registers its regions at once (a Receiver does per connected sender); the
    # registration of device memory is what fails here, naming the GPU it was resolved to.
    with pytest.raises(fl.FabricError, match=device) as err:
        fkv.Sender(layout(), [_FakeCudaTensor(index)])
    assert "cuda" in str(err.value).lower()


def _every_host_kind() -> list[object]:
    kinds: list[object] = [np.zeros(REGION_BYTES // 4, np.float32), bytearray(REGION_BYTES)]
    try:
        import torch

        kinds.append(torch.zeros(REGION_BYTES // 4, dtype=torch.float32))
    except ImportError:
        pass
    return kinds


@pytest.mark.parametrize("region", _every_host_kind(), ids=lambda r: type(r).__name__)
def test_host_memory_of_every_kind_is_a_region(region):
    sender = fkv.Sender(layout(), [region], request_timeout_ms=1000)
    sender.close()
    receiver = fkv.Receiver(layout(), [region], request_timeout_ms=1000)
    receiver.close()


def test_regions_given_as_tensors_and_raw_pointers_carry_every_byte():
    torch = pytest.importorskip("torch")
    src = torch.arange(REGION_BYTES // 4, dtype=torch.float32)
    dst = np.zeros(REGION_BYTES // 4, np.float32)
    # The sender's region a CPU tensor, the receiver's a raw (ptr, length, device) of an array.
    sender = fkv.Sender(layout(), [src], request_timeout_ms=2000, heartbeat_ms=200)
    receiver = fkv.Receiver(layout(), [(dst.ctypes.data, dst.nbytes, "cpu")],
                            request_timeout_ms=2000, heartbeat_ms=200)
    try:
        source = receiver.connect(sender.address, 10.0)
        sender.prepare("r", [0], 1)
        receiver.request("r", [0], 1, [source])
        sender.layer_done("r", 0)
        state, error = receiver.wait("r", 30.0)
        assert state == "done", error
        np.testing.assert_array_equal(dst, src.numpy())
        receiver.release("r")
    finally:
        receiver.close()
        sender.close()


def _refusals() -> list[tuple[str, object, type[BaseException], str]]:
    readonly = np.zeros(REGION_BYTES, np.uint8)
    readonly.flags.writeable = False
    cases: list[tuple[str, object, type[BaseException], str]] = [
        ("strided-array", np.zeros((64, 64), np.float32)[:, ::2], fl.InvalidArgumentError,
         "contiguous"),
        ("read-only", readonly, fl.InvalidArgumentError, "read-only"),
        ("bytes", bytes(REGION_BYTES), fl.InvalidArgumentError, "read-only"),
        ("str", "a string", TypeError, "buffer"),
        ("object", object(), TypeError, "buffer"),
        ("raw-without-length", (0x1000,), TypeError, "ptr, length"),
        ("raw-zero-length", (0x1000, 0), fl.InvalidArgumentError, "length > 0"),
        ("raw-bad-device", (0x1000, 64, "tpu"), fl.InvalidArgumentError, "device"),
    ]
    try:
        import torch

        strided = torch.zeros(64, 64, dtype=torch.float32).t()
        assert not strided.is_contiguous()
        cases.append(("strided-tensor", strided, fl.InvalidArgumentError, "contiguous"))
    except ImportError:
        pass
    return cases


@pytest.mark.parametrize("side", ["Sender", "Receiver"])
@pytest.mark.parametrize("region,error,needle", [c[1:] for c in _refusals()],
                         ids=[c[0] for c in _refusals()])
def test_what_reg_mr_refuses_kv_refuses_with_the_same_class(side, region, error, needle):
    with pytest.raises(error, match=needle):
        getattr(fkv, side)(layout(), [region])
    # The engine's own path raises the same class for the same object (a raw tuple is KV's
    # spelling of reg_mr(ptr, length, device); a one-element one has no reg_mr spelling).
    if isinstance(region, tuple) and len(region) < 2:
        return
    args = region if isinstance(region, tuple) else (region,)
    with fl.Engine("tcp") as engine:
        with pytest.raises(error, match=needle if error is not TypeError else None):
            engine.reg_mr(*args)


def test_a_bad_tail_is_refused_like_a_region():
    with pytest.raises(fl.InvalidArgumentError, match="contiguous"):
        fkv.Sender(layout(), [np.zeros(REGION_BYTES, np.uint8)],
                   tail=np.zeros((64, 64), np.uint8)[:, ::2])
    with pytest.raises(TypeError):
        fkv.Sender(layout(), [np.zeros(REGION_BYTES, np.uint8)], tail=object())


@pytest.mark.parametrize("side", ["Sender", "Receiver"])
def test_regions_live_until_close(side):
    region = np.zeros(REGION_BYTES, np.uint8)
    alive = weakref.ref(region)
    endpoint = getattr(fkv, side)(layout(), [region], request_timeout_ms=1000)
    del region
    gc.collect()
    assert alive() is not None, "a registered region was freed while registered"
    endpoint.close()
    gc.collect()
    assert alive() is None, "close() did not let go of the region"
