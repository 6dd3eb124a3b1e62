"""A one-sided Ray tensor transport over fabric-lib: `@ray.method(tensor_transport="FABRIC")` or
`ray.put(tensors, _tensor_transport="FABRIC")` in an actor, and the actor that gets the object
READs the tensors straight out of the producer's memory (docs/weights.md, "Ray tensor
transport").

    import fabric_lib.ray_transport as frt
    frt.register()          # in the driver, before creating the actors that use it

    @ray.remote(enable_tensor_transport=True)
    class Trainer:
        @ray.method(tensor_transport="FABRIC")
        def weights(self) -> dict[str, torch.Tensor]: ...

How it maps onto Ray Direct Transport (ray.experimental.TensorTransportManager, Ray 2.60):
- The producer registers each tensor for remote READ when Ray extracts the object's metadata
  (`extract_tensor_transport_metadata`); the metadata carries the MrDescs, which name the
  producer's engine, so no communicator or address exchange is needed.
- The consumer allocates (or takes Ray's target buffers), registers them, READs every tensor and
  deregisters; the producer takes no part (`is_one_sided`).
- Ray's `garbage_collect` on the producer deregisters once the object is out of scope; until then
  the engine holds the tensors, so their memory stays valid for readers.
- A READ that does not finish within FABRIC_RAY_TIMEOUT_S (default 60 s), or that the peer fails
  (a dead producer), raises a FabricError from the get; `abort_transport` ends the consumer's
  wait early. Ray need not kill the actors to unblock them (`can_abort_transport`).

One engine per process: the transport uses the engine given to `use_engine()` (the process's
engine, shared with its other workloads), else opens its own on first use with provider
FABRIC_RAY_PROVIDER (default "tcp") bound to FABRIC_RAY_BIND_ADDRESS (default 127.0.0.1), and
stops it when the interpreter exits. Both sides must use the same provider. CPU tensors only
(Ray's GPU path needs a CUDA build of the engine and a GPU, neither tested here); a
non-contiguous tensor is refused with InvalidArgumentError naming it.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import ray
from ray.experimental import CommunicatorMetadata, TensorTransportManager, TensorTransportMetadata

import fabric_lib as fl

if TYPE_CHECKING:
    import torch

NAME = "FABRIC"
_POLL_S = 0.05  # how often a waiting recv looks at abort_transport's flag


@dataclass
class FabricTransportMetadata(TensorTransportMetadata):
    """Ray's shapes and dtypes plus, per tensor, the producer's MrDesc (None for an empty one)."""

    descs: list[fl.MrDesc | None] = field(default_factory=list)


class _Process:
    """The process's engine for this transport, and the producer's registrations by object id."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.engine: fl.Engine | None = None
        self.owned = False
        self.handles: dict[str, list[fl.MrHandle]] = {}
        self.aborted: set[str] = set()

    def get_engine(self) -> fl.Engine:
        with self.lock:
            if self.engine is None:
                self.engine = fl.Engine(
                    os.environ.get("FABRIC_RAY_PROVIDER", "tcp"),
                    bind_address=os.environ.get("FABRIC_RAY_BIND_ADDRESS", "127.0.0.1"),
                )
                self.owned = True
                atexit.register(self.stop)
            return self.engine

    def stop(self) -> None:
        with self.lock:
            engine, owned = self.engine, self.owned
            self.engine, self.owned = None, False
            self.handles.clear()
        if engine is not None and owned:
            engine.stop()


_process = _Process()


def use_engine(engine: fl.Engine) -> None:
    """Makes the transport use `engine` (the process's, shared with other workloads) instead of
    opening its own. Call before the first object moves through the transport in this process."""
    with _process.lock:
        if _process.engine is not None and _process.engine is not engine:
            raise fl.InvalidArgumentError("the FABRIC Ray transport already runs on another engine in this process")
        _process.engine, _process.owned = engine, False


def engine() -> fl.Engine:
    """The engine the transport runs on in this process, opened on first use."""
    return _process.get_engine()


def register() -> None:
    """Registers the FABRIC transport with Ray for CPU torch tensors. Call it in the driver before
    creating the actors (Ray then registers it in each of them). Calling it again is harmless."""
    import torch

    try:
        ray.experimental.register_tensor_transport(NAME, ["cpu"], FabricTensorTransport, torch.Tensor)
    except ValueError as e:
        if "already registered" not in str(e):
            raise


def _transport_ready(_self: Any) -> bool:
    import fabric_lib.ray_transport  # noqa: F401 - importable in the actor's process

    return True


def _timeout_s() -> float:
    return float(os.environ.get("FABRIC_RAY_TIMEOUT_S", "60"))


class FabricTensorTransport(TensorTransportManager):
    def tensor_transport_backend(self) -> str:
        return NAME

    @staticmethod
    def is_one_sided() -> bool:
        return True

    @staticmethod
    def can_abort_transport() -> bool:
        return True

    def actor_has_tensor_transport(self, actor: ray.actor.ActorHandle) -> bool:
        ref = actor.__ray_call__.options(concurrency_group="_ray_system").remote(_transport_ready)
        try:
            return bool(ray.get(ref, timeout=_timeout_s()))
        except Exception:  # noqa: BLE001 - an actor without fabric_lib has no transport
            return False

    def extract_tensor_transport_metadata(
        self, obj_id: str, rdt_object: list[torch.Tensor]
    ) -> FabricTransportMetadata:
        for i, t in enumerate(rdt_object):
            if t.device.type != "cpu":
                raise fl.InvalidArgumentError(f"FABRIC transport: tensor {i} is on {t.device}; only CPU tensors")
            if not t.is_contiguous():
                raise fl.InvalidArgumentError(
                    f"FABRIC transport: tensor {i} (shape {tuple(t.shape)}) is not contiguous; call .contiguous()"
                )
        nonempty = [t for t in rdt_object if t.numel() > 0]
        registered = _process.get_engine().reg_mrs(nonempty, remote_read=True) if nonempty else []
        descs: list[fl.MrDesc | None] = []
        handles = iter(registered)
        for t in rdt_object:
            descs.append(next(handles)[1] if t.numel() > 0 else None)
        with _process.lock:
            _process.handles.setdefault(obj_id, []).extend(h for h, _ in registered)
        return FabricTransportMetadata(
            tensor_meta=[(t.shape, t.dtype) for t in rdt_object],
            tensor_device="cpu" if rdt_object else None,
            descs=descs,
        )

    def get_communicator_metadata(
        self, src_actor: ray.actor.ActorHandle, dst_actor: ray.actor.ActorHandle, backend: str | None = None
    ) -> CommunicatorMetadata:
        return CommunicatorMetadata()  # the MrDescs name the producer

    def recv_multiple_tensors(
        self,
        obj_id: str,
        tensor_transport_metadata: TensorTransportMetadata,
        communicator_metadata: CommunicatorMetadata,
        target_buffers: list[Any] | None = None,
    ) -> list[torch.Tensor]:
        import torch

        meta = tensor_transport_metadata
        if not isinstance(meta, FabricTransportMetadata) or len(meta.descs) != len(meta.tensor_meta):
            raise fl.MalformedError(f"FABRIC transport: object {obj_id} carries no fabric descriptors")
        if target_buffers is not None and len(target_buffers) != len(meta.tensor_meta):
            raise fl.InvalidArgumentError(
                f"FABRIC transport: {len(target_buffers)} target buffers for {len(meta.tensor_meta)} tensors"
            )
        out: list[torch.Tensor] = []
        for i, (shape, dtype) in enumerate(meta.tensor_meta):
            if target_buffers is None:
                out.append(torch.empty(shape, dtype=dtype))
                continue
            b = target_buffers[i]
            if tuple(b.shape) != tuple(shape) or b.dtype != dtype or b.device.type != "cpu" or not b.is_contiguous():
                raise fl.InvalidArgumentError(
                    f"FABRIC transport: target buffer {i} is {b.dtype}{tuple(b.shape)} on {b.device}, "
                    f"the object's tensor is {dtype}{tuple(shape)} on cpu (contiguous)"
                )
            out.append(b)
        pairs = [(i, d) for i, d in enumerate(meta.descs) if d is not None]
        for i, d in pairs:
            if d.size != out[i].numel() * out[i].element_size():
                raise fl.MalformedError(f"FABRIC transport: tensor {i}'s descriptor is {d.size} bytes, not {out[i].nbytes}")
        if not pairs:
            return out
        engine = _process.get_engine()
        registered = engine.reg_mrs([out[i] for i, _ in pairs])
        try:
            transfers = [engine.single_read(d, h, d.size) for (_, d), (h, _) in zip(pairs, registered)]
            self._wait(obj_id, transfers)
        finally:
            for h, _ in registered:
                engine.dereg_mr(h)  # waits for a READ still in flight into it
            with _process.lock:
                _process.aborted.discard(obj_id)
        return out

    @staticmethod
    def _wait(obj_id: str, transfers: list[fl.Transfer]) -> None:
        deadline = time.monotonic() + _timeout_s()
        for t in transfers:
            while not t.done():
                with _process.lock:
                    aborted = obj_id in _process.aborted
                if aborted:
                    raise fl.CancelledError(f"FABRIC transport: the transfer of {obj_id} was aborted")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise fl.FabricTimeoutError(
                        f"FABRIC transport: object {obj_id} not read within {_timeout_s()} s (FABRIC_RAY_TIMEOUT_S)"
                    )
                try:
                    t.wait(min(left, _POLL_S))
                except fl.FabricTimeoutError:
                    if t.done():
                        raise  # the READ's own timeout, not this wait's
            t.wait(0)  # raises the READ's error, if any

    def send_multiple_tensors(
        self,
        tensors: list[Any],
        tensor_transport_metadata: TensorTransportMetadata,
        communicator_metadata: CommunicatorMetadata,
    ) -> None:
        raise NotImplementedError("FABRIC is one-sided: the consumer READs, the producer sends nothing")

    def garbage_collect(self, obj_id: str, tensor_transport_meta: TensorTransportMetadata, tensors: list[Any]) -> None:
        with _process.lock:
            handles = _process.handles.pop(obj_id, [])
            _process.aborted.discard(obj_id)
            engine = _process.engine
        if engine is None or engine.stopped:
            return
        for h in handles:
            engine.dereg_mr(h)

    def abort_transport(self, obj_id: str, communicator_metadata: CommunicatorMetadata) -> None:
        with _process.lock:
            _process.aborted.add(obj_id)


def registrations() -> int:
    """How many producer-side registrations the transport holds in this process (for tests and
    leak checks): objects Ray has not yet garbage collected."""
    with _process.lock:
        return sum(len(v) for v in _process.handles.values())
