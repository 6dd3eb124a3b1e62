"""The tensor-transport case of weights.vllm_live: fabric_lib.ray_transport's one-sided "FABRIC"
transport in Ray Direct Transport, on the test's Ray cluster (docs/weights.md, "Ray tensor
transport"). A producer actor's tensors reach a consumer actor three ways (an actor method with
tensor_transport="FABRIC", a ray.put in the producer, a ray.put in the driver), and each is
checked byte for byte against the producer's own checksums, with the consumer's engine having
READ exactly those bytes; the driver gets one too. Then: the producer's registrations are returned once the refs are out
of scope, a non-contiguous tensor is refused naming it, and a get from a killed producer fails
in bounded time while the consumer keeps serving."""

from __future__ import annotations

import hashlib
from typing import Any

import ray
import torch

import fabric_lib.ray_transport as frt

# Before the classes: @ray.method(tensor_transport="FABRIC") checks the name when it decorates,
# in the driver and again in each actor's process as it imports this module.
frt.register()


def _tensors(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randn(1 << 20, generator=g),  # 4 MiB float32
        torch.randn(1001, 7, generator=g).to(torch.bfloat16),  # an odd size
        torch.randint(-(1 << 40), 1 << 40, (513,), generator=g, dtype=torch.int64),
        torch.empty(0, 3),  # nothing to READ
    ]


def digest(tensors: list[torch.Tensor]) -> list[tuple[str, tuple[int, ...], str]]:
    return [
        (str(t.dtype), tuple(t.shape), hashlib.sha256(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest())
        for t in tensors
    ]


def _reads(engine: Any) -> tuple[int, int, int]:
    r = engine.metrics()["requests"]["single_read"]
    return r["ok"], r["failed"], r["bytes_ok"]


@ray.remote(enable_tensor_transport=True, num_cpus=0)
class Producer:
    def __init__(self, seed: int) -> None:
        self.held = _tensors(seed)

    def digest(self) -> list[tuple[str, tuple[int, ...], str]]:
        return digest(self.held)

    @ray.method(tensor_transport="FABRIC")
    def tensors(self) -> list[torch.Tensor]:
        return self.held

    def put(self) -> list[ray.ObjectRef]:
        return [ray.put(self.held, _tensor_transport="FABRIC")]  # nested: the caller gets the ref

    def put_non_contiguous(self) -> str:
        try:
            ray.put([self.held[1].t()], _tensor_transport="FABRIC")
        except Exception as e:  # noqa: BLE001 - the driver asserts on the text
            return f"{type(e).__name__}: {e}"
        return "accepted"

    def registrations(self) -> int:
        return frt.registrations()

    def registrations_after_free(self, timeout_s: float) -> int:
        """The transport's registrations once Ray freed every object holding self.held."""
        from ray.experimental import wait_tensor_freed

        for t in self.held:
            wait_tensor_freed(t, timeout=timeout_s)
        return frt.registrations()


@ray.remote(enable_tensor_transport=True, num_cpus=0)
class Consumer:
    def receive(self, tensors: list[torch.Tensor]) -> dict[str, Any]:
        """Ray resolved the argument: the tensors came over the transport before this ran."""
        return {"digest": digest(tensors), "reads": _reads(frt.engine())}

    def get(self, refs: list[ray.ObjectRef], timeout_s: float) -> dict[str, Any]:
        before = _reads(frt.engine())
        try:
            tensors = ray.get(refs[0], timeout=timeout_s)
        except Exception as e:  # noqa: BLE001 - the driver asserts on the text
            return {"error": f"{type(e).__name__}: {e}", "before": before, "reads": _reads(frt.engine())}
        return {"digest": digest(tensors), "before": before, "reads": _reads(frt.engine())}

    def reads(self) -> tuple[int, int, int]:
        return _reads(frt.engine())


def run(check: Any, get: Any, started: list, call_s: float) -> None:
    """Runs the case on the cluster the caller started; every actor it makes goes in `started`."""
    producer, consumer = Producer.remote(1), Consumer.remote()
    started += [producer, consumer]
    expected = get(producer.digest.remote())
    sent = _tensors(1)  # what the producer holds
    payload = sum(t.numel() * t.element_size() for t in sent)
    nonempty = sum(1 for t in sent if t.numel() > 0)

    r = get(consumer.receive.remote(producer.tensors.remote()))  # the consumer's engine opens here
    check(r["digest"] == expected, "transport: an actor method's tensors arrive byte for byte (float32, bf16, int64, empty)")
    check(r["reads"] == (nonempty, 0, payload),
          f"transport: the consumer's engine READ them ({r['reads']}, expected {nonempty} ok, {payload} B)")

    r = get(consumer.get.remote(get(producer.put.remote()), call_s))
    check(r.get("digest") == expected, f"transport: a ray.put in the producer arrives: {r.get('error', 'ok')}")
    check(r["reads"][0] - r["before"][0] == nonempty and r["reads"][2] - r["before"][2] == payload,
          f"transport: ... over single_read ({r['before']} -> {r['reads']})")

    mine = _tensors(2)
    r = get(consumer.get.remote([ray.put(mine, _tensor_transport="FABRIC")], call_s))
    check(r.get("digest") == digest(mine), f"transport: a ray.put in the driver arrives: {r.get('error', 'ok')}")

    here = ray.get(producer.tensors.remote(), timeout=call_s)  # the driver READs it too
    check(digest(here) == expected, "transport: a ray.get in the driver arrives byte for byte")

    held = producer.tensors.remote()
    n = get(producer.registrations.remote())
    check(n >= nonempty, f"transport: the producer holds registrations while a ref lives ({n})")
    del held
    left = get(producer.registrations_after_free.remote(call_s))
    check(left == 0, f"transport: the producer's registrations are returned once the refs are freed ({left} left)")

    refused = get(producer.put_non_contiguous.remote())
    check("InvalidArgumentError" in refused and "not contiguous" in refused,
          f"transport: a non-contiguous tensor is refused: {refused}")

    # A producer killed after handing out a ref: the get fails (Ray's error or the transport's),
    # within the call's bound, and the consumer goes on serving.
    doomed = Producer.remote(3)
    started.append(doomed)
    refs = get(doomed.put.remote())
    ray.kill(doomed, no_restart=True)
    r = get(consumer.get.remote(refs, call_s / 2), call_s)
    check("error" in r, f"transport: a get from a killed producer fails: {r.get('error', 'it succeeded')[:160]}")
    again = get(consumer.receive.remote(producer.tensors.remote()))
    check(again["digest"] == expected, "transport: the consumer still receives after that failure")
