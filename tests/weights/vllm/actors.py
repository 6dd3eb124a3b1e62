"""The Ray actors of the test: an inference engine (vllm.LLM with the fabric backend, selected by
name: the plugin comes from the vllm.general_plugins entry point), trainer ranks, and a fresh
reference instance. Every actor method returns errors as text ({"error": "Type: message"}) so the
driver asserts on them without unpickling exception types across processes."""

from __future__ import annotations

import time
from typing import Any

import ray

import model as m


def _err(e: BaseException) -> dict[str, Any]:
    return {"error": f"{type(e).__name__}: {e}"}


def _llm(path: str, **extra: Any):
    from vllm import LLM

    return LLM(model=path, skip_tokenizer_init=True, dtype="float32", max_model_len=256, max_num_seqs=8,
               enforce_eager=True, seed=0, distributed_executor_backend="uni", **extra)


def _generate(llm: Any, prompts: list[list[int]], max_tokens: int) -> list[list[int]]:
    from vllm import SamplingParams

    sp = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
    return [list(o.outputs[0].token_ids) for o in outs]


class Engine:
    """The served model. Ray runs one call at a time: a generate submitted during an update runs
    between the update's calls, on whatever version is served then."""

    def __init__(self, path: str) -> None:
        # Nothing of fabric_lib is imported: vLLM finds the backend through its plugin entry point.
        self.llm = _llm(path, weight_transfer_config={"backend": "fabric"})

    def _rpc(self, method: Any, **kwargs: Any) -> Any:
        return self.llm.collective_rpc(method, kwargs=kwargs or None)[0]

    def describe(self, checksums: bool = False) -> dict[str, Any]:
        from fabric_lib.weights.vllm_engine import describe

        d = self._rpc(describe)
        if checksums:
            d["checksums"] = self._rpc(_arena_checksums)
        return d

    def init(self, info: dict[str, Any]) -> dict[str, Any]:
        try:
            self._rpc("init_weight_transfer_engine", init_info=info)
        except Exception as e:  # noqa: BLE001 - the driver asserts on the text
            return _err(e)
        return self.describe()

    def begin(self, version: int, ranks: list[int]) -> dict[str, Any]:
        """vLLM's start_weight_update, then the arm phase: checks, and says which arena to write."""
        try:
            self._rpc("start_weight_update")
            self._rpc("update_weights", update_info={"phase": "arm", "version": version, "trainer_ranks": ranks})
        except Exception as e:  # noqa: BLE001
            return _err(e)
        return {"standby": self.describe()["standby"]}

    def complete(self, version: int, wait_s: float) -> dict[str, Any]:
        """The wait phase (bounded), then finish_weight_update: the swap."""
        t0 = time.monotonic()
        try:
            self._rpc("update_weights", update_info={"phase": "wait", "version": version, "wait_s": wait_s})
        except Exception as e:  # noqa: BLE001
            return {**_err(e), "waited_s": time.monotonic() - t0}
        self._rpc("finish_weight_update")
        return {"version": self.describe()["version"], "stats": self.describe()["stats"]}

    def abort(self, version: int) -> dict[str, Any]:
        self._rpc("update_weights", update_info={"phase": "abort", "version": version})
        self._rpc("finish_weight_update")
        return {"version": self.describe()["version"]}

    def generate(self, prompts: list[list[int]], max_tokens: int) -> list[list[int]]:
        return _generate(self.llm, prompts, max_tokens)

    def load_weights_update(self, weights: dict[str, Any]) -> float:
        """The baseline's receive side: vLLM's own reload of full tensors (layerwise reload)."""
        return self._rpc(_load_full, weights=weights)


def _arena_checksums(worker: Any) -> list[int]:
    import zlib

    return [zlib.crc32(rx.arena) for rx in worker.weight_transfer_engine.arenas]


def _load_full(worker: Any, weights: dict[str, Any]) -> float:
    import torch
    from vllm.model_executor.model_loader.reload.layerwise import (
        finalize_layerwise_reload,
        initialize_layerwise_reload,
    )

    t0 = time.monotonic()
    model = worker.model_runner.get_model()
    initialize_layerwise_reload(model)
    model.load_weights((n, torch.from_numpy(w)) for n, w in weights.items())
    finalize_layerwise_reload(model, worker.model_runner.model_config)
    return time.monotonic() - t0


class Reference:
    """A fresh vLLM loading a checkpoint from safetensors: what an update must be equal to."""

    def __init__(self, path: str) -> None:
        self.llm = _llm(path)

    def generate(self, prompts: list[list[int]], max_tokens: int) -> list[list[int]]:
        return _generate(self.llm, prompts, max_tokens)


class Trainer:
    """One trainer rank: holds its FSDP shard of every parameter, writes it with the fabric
    backend's trainer engine (made through vLLM's WeightTransferTrainerFactory by name)."""

    def __init__(self, rank: int, ranks: int, base_dir: str, provider: str = "tcp") -> None:
        self.provider = provider
        self.rank, self.ranks = rank, ranks
        self.base = m.base_weights(base_dir)
        self.meta = m.trainer_metadata(self.base, ranks)
        self.engine: Any = None
        self.failed = False
        self._open()

    def _open(self) -> None:
        import numpy as np

        import fabric_lib as fl
        from fabric_lib.weights import reserve_update_imms

        self.fl_engine = fl.Engine(self.provider)
        self.word = np.zeros(64, np.uint8)  # the barrier's target: immediates only
        _, desc = self.fl_engine.reg_mr(self.word)
        self.imms = reserve_update_imms(self.fl_engine)  # the barriers' immediates
        self.barrier = (bytes(desc), [self.imms.first, self.imms.count])

    def hello(self) -> tuple[list[dict], tuple[bytes, list[int]]]:
        """This rank's metadata and barrier (descriptor, immediate block). After a failed update
        the rank starts over with a new fabric engine (a new address): writes to a dead peer may
        still be queued in the old one (tcp connection retries), as a restarted trainer group
        would."""
        if self.failed:
            if self.engine is not None:
                self.engine.shutdown()
                self.engine = None
            self.fl_engine.stop()
            self._open()
            self.failed = False
        return self.meta, self.barrier

    def connect(self, described: dict[str, Any], barriers: list[tuple[bytes, list[int]]],
                timeout_s: float) -> dict[str, Any]:
        from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory
        from vllm.plugins import load_general_plugins

        load_general_plugins()  # the fabric backend by entry point, as in the engine
        from fabric_lib.weights.vllm_trainer import FabricTrainerInitInfo

        info = FabricTrainerInitInfo(rank=self.rank, engine=self.fl_engine, schedule=described["schedule"],
                                     arenas=described["arenas"], imms=described["imms"],
                                     barriers=[d for d, _ in barriers], barrier_imms=[b for _, b in barriers],
                                     trainer=self.meta,
                                     mesh=[["fsdp", self.ranks]], timeout_s=timeout_s)
        try:
            if self.engine is not None:
                self.engine.shutdown()
            self.engine = WeightTransferTrainerFactory.trainer_init(info, client=None)
        except Exception as e:  # noqa: BLE001
            return _err(e)
        return {"ok": True}

    def send(self, version: int, arena: int, partial: bool = False) -> dict[str, Any]:
        """Writes this rank's shards of version `version`; partial: only the writes, no barrier
        and no commit (what a rank killed mid-update leaves), returning once they landed."""
        import fabric_lib as fl

        mine = m.shard(m.version_weights(self.base, version), self.meta, self.ranks, self.rank)
        t0 = time.monotonic()
        try:
            stats = self.engine.send_weights(version, arena, mine, stop_after_group=0 if partial else None)
        except fl.FabricError as e:
            self.failed = True
            return _err(e)
        if partial:
            deadline = time.monotonic() + 30
            while self.fl_engine.outstanding_requests and time.monotonic() < deadline:
                self.fl_engine.progress()
        return {"ok": True, "send_s": time.monotonic() - t0, "stats": stats}


# ------------------------------------------------------------------ the benchmark's baseline
# The usual RL recipe on CPU (tools/weights/vllm_bench.py): FSDP shards gathered to trainer rank 0
# over gloo, broadcast per parameter from rank 0 to the engine's worker over a gloo group, and
# each tensor loaded with the model's load_weights inside vLLM's layerwise reload.


def gloo_group(host: str, port: int, rank: int, world: int, is_master: bool) -> Any:
    """A gloo group beside vLLM's own default group (torch allows one default group per process)."""
    from datetime import timedelta

    import torch.distributed as dist

    store = dist.TCPStore(host, port, world, is_master, timeout=timedelta(seconds=120))
    return dist.ProcessGroupGloo(dist.PrefixStore("bench", store), rank, world, timedelta(seconds=120))


def _gloo_receive(worker: Any, group: Any, meta: list[dict]) -> float:
    import torch
    from vllm.model_executor.model_loader.reload.layerwise import (
        finalize_layerwise_reload,
        initialize_layerwise_reload,
    )

    t0 = time.monotonic()
    model = worker.model_runner.get_model()

    def received():
        for p in meta:
            t = torch.empty(p["shape"], dtype=torch.float32)
            group.broadcast(t, 0).wait()
            yield p["name"], t

    initialize_layerwise_reload(model)
    model.load_weights(received())
    finalize_layerwise_reload(model, worker.model_runner.model_config)
    return time.monotonic() - t0


class BenchTrainer(Trainer):
    def prepare(self) -> int:
        self.mine = m.shard(self.base, self.meta, self.ranks, self.rank)
        return sum(a.nbytes for a in self.mine.values())

    def send_prepared(self, version: int, arena: int) -> dict[str, Any]:
        t0 = time.monotonic()
        stats = self.engine.send_weights(version, arena, self.mine)
        return {"send_s": time.monotonic() - t0, "stats": stats}

    def gloo_join(self, port_fsdp: int, port_bcast: int) -> bool:
        self.fsdp = gloo_group("127.0.0.1", port_fsdp, self.rank, self.ranks, self.rank == 0)
        self.bcast = gloo_group("127.0.0.1", port_bcast, 0, 2, True) if self.rank == 0 else None
        return True

    def gloo_send(self) -> float:
        """Every parameter: all-gather the FSDP shards (full_tensor()), rank 0 broadcasts it."""
        import torch

        t0 = time.monotonic()
        for p in self.meta:
            mine = torch.from_numpy(self.mine[p["name"]])
            parts = [torch.empty_like(mine) for _ in range(self.ranks)]  # equal halves here
            self.fsdp.allgather([parts], [mine]).wait()
            if self.bcast is not None:
                full = torch.cat(parts, 0)
                self.bcast.broadcast(full, 0).wait()
        return time.monotonic() - t0


class BenchEngine(Engine):
    def gloo_join(self, port_bcast: int) -> bool:
        self.bcast = gloo_group("127.0.0.1", port_bcast, 1, 2, False)
        return True

    def gloo_receive(self, meta: list[dict]) -> float:
        # One actor call: generation waits for the whole load (vLLM's nccl engine likewise puts
        # the layers on meta from start_weight_update to finish_weight_update).
        return self.llm.collective_rpc(_gloo_receive, args=(self.bcast, meta))[0]


# Ray actors: the classes above stay plain so the benchmark's can extend them.
EngineActor = ray.remote(num_cpus=0)(Engine)
ReferenceActor = ray.remote(num_cpus=0)(Reference)
TrainerActor = ray.remote(num_cpus=0)(Trainer)
BenchEngineActor = ray.remote(num_cpus=0)(BenchEngine)
BenchTrainerActor = ray.remote(num_cpus=0)(BenchTrainer)
