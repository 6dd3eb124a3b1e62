"""ctest weights.vllm_live: RL weight updates into a live CPU vLLM through the `fabric`
weight-transfer backend, driven from Ray (docs/weights.md, "vLLM backend").

A local single-node Ray cluster runs one vLLM engine actor (vllm.LLM, TP 1, the backend
selected by name through weight_transfer_config, found through the vllm.general_plugins entry
point), two trainer actors (each holding its FSDP half of every parameter) and, per checked
version, a fresh vLLM reference actor that loads the same weights from safetensors. One engine
serves every case, in order:
  bad-init     trainer metadata with a wrong shape, a wrong dtype, a stray name: each refused
               naming the parameter, before anything is registered; then the right one.
  versions     v1..v3, each a random perturbation of all weights: greedy tokens after the update
               equal the fresh instance's, token for token, and differ from the previous
               version's; a generate submitted while the trainers write runs on the old version.
  bad-update   an older version, missing trainer rank, an update started twice: each refused
               before any trainer starts (both arenas' checksums unchanged), v3 still served.
  killed       trainer rank 1 writes part of v5 and is killed: the update fails within 10 s,
               v3 keeps serving (tokens equal v3's reference).
  recovered    a new rank 1, rank 0 on a new fabric engine (its old one may still retry the
               dead peer), trainers reconnected: v6 succeeds and equals its fresh load.
Before the vLLM actors, on the same cluster:
  transport    fabric_lib.ray_transport's one-sided "FABRIC" Ray tensor transport
               (transport_case.py): actor method, ray.put in an actor and in the driver, each
               read byte for byte; registrations returned; non-contiguous refused; a killed
               producer fails the get in bounded time.
Fabric traffic is on 127.0.0.1 (tcp, FI_TCP_IFACE=lo), and so is Ray's: Ray 2.60 would turn a
127.0.0.1 node address into the host's routable one (services.resolve_ip_for_localhost);
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (env() below) keeps its node address on loopback.
Run by tests/support/in-vllm-venv.sh in the venv of scripts/vllm-venv.sh."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

RANKS = 2
PROMPTS = [[1, 2, 3, 4, 5], [7, 8, 9], [100, 200, 300, 400], [42] * 6]
MAX_TOKENS = 12
START_S = 300  # the longest an actor may take to start (vLLM on 2 shared cores)
CALL_S = 120  # the longest any other call may take
TRAINER_TIMEOUT_S = 4.0  # the executor's bound on each wait (a dead peer's barrier)
WAIT_S = 6.0  # the engine's bound on one update's transfer
KILLED_BOUND_S = 10.0  # the bound: a killed rank fails the update within this


def env() -> dict[str, str]:
    return {
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "OMP_NUM_THREADS": "1",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # the engine core inside the actor's process
        "VLLM_LOGGING_LEVEL": "WARNING",
        "FI_TCP_IFACE": "lo",
        "FI_SOCKETS_IFACE": "lo",
        "TOKENIZERS_PARALLELISM": "false",
        "RAY_USAGE_STATS_ENABLED": "0",
        # Ray maps a 127.0.0.1 node address to the host's routable one (resolve_ip_for_localhost)
        # unless clusters are off: with this its processes reach each other on loopback only
        # (checked: every connection of a local cluster is 127.0.0.1), as the project's rule asks.
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "GLOO_SOCKET_IFNAME": "lo",
    }


def plugin_dir(root: str) -> str:
    """A dist-info declaring the fabric backend's entry point, as an installed fabric-lib would:
    vLLM loads it by entry point; the engine actor imports nothing of fabric_lib itself."""
    d = os.path.join(root, "plugin", "fabric_lib_weights_plugin-0.0.dist-info")
    os.makedirs(d)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: fabric-lib-weights-plugin\nVersion: 0.0\n")
    with open(os.path.join(d, "entry_points.txt"), "w") as f:
        f.write("[vllm.general_plugins]\nfabric_weights = fabric_lib.weights.vllm:register\n")
    return os.path.dirname(d)


class Check:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def __call__(self, ok: bool, what: str) -> bool:
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            self.failures.append(what)
        return ok


def main() -> int:
    import ray

    import actors
    import model as m

    check = Check()
    root = tempfile.mkdtemp(prefix="fabric-vllm-live-")
    os.environ.update(env())
    os.environ["PYTHONPATH"] = os.pathsep.join([plugin_dir(root), HERE, os.environ.get("PYTHONPATH", "")])
    base_dir = os.path.join(root, "model")
    m.make_model(base_dir)
    base = m.base_weights(base_dir)
    print(f"model: {sum(w.nbytes for w in base.values()) / 1e6:.1f} MB float32, {len(base)} tensors", flush=True)

    ray.init(address="local", num_cpus=4, include_dashboard=False, _node_ip_address="127.0.0.1",
             object_store_memory=256 << 20, log_to_driver=True,
             runtime_env={"env_vars": {**env(), "PYTHONPATH": os.environ["PYTHONPATH"]}})
    started: list = []
    try:
        def get(ref, timeout=CALL_S):
            return ray.get(ref, timeout=timeout)

        import transport_case  # registers the transport: before any actor is created

        transport_case.run(check, get, started, CALL_S)

        def reference(version: int) -> list[list[int]]:
            path = os.path.join(root, f"v{version}")
            m.save_version(base_dir, m.version_weights(base, version), path)
            ref = actors.ReferenceActor.remote(path)
            try:
                return get(ref.generate.remote(PROMPTS, MAX_TOKENS), START_S)
            finally:
                ray.kill(ref)
                shutil.rmtree(path, ignore_errors=True)

        engine = actors.EngineActor.remote(base_dir)
        trainers = [actors.TrainerActor.remote(r, RANKS, base_dir) for r in range(RANKS)]
        started += [engine] + trainers
        hellos = get([t.hello.remote() for t in trainers], START_S)
        meta = hellos[0][0]
        barriers = [h[1] for h in hellos]
        get(engine.generate.remote(PROMPTS, 1), START_S)  # started

        # bad-init ------------------------------------------------------------------------
        def info(params):
            return {"trainer": params, "mesh": [["fsdp", RANKS]], "provider": "tcp", "max_chunk_bytes": 1 << 20}

        q = "model.layers.1.self_attn.q_proj.weight"
        wrong_shape = [dict(p, shape=[p["shape"][0] - 32, p["shape"][1]]) if p["name"] == q else p for p in meta]
        r = get(engine.init.remote(info(wrong_shape)))
        check("InvalidArgumentError" in r.get("error", "") and "qkv_proj" in r["error"] and q in r["error"],
              f"bad-init: a wrong shape is refused naming it: {r.get('error')}")
        n = "model.norm.weight"
        wrong_dtype = [dict(p, dtype="bfloat16") if p["name"] == n else p for p in meta]
        r = get(engine.init.remote(info(wrong_dtype)))
        check("InvalidArgumentError" in r.get("error", "") and n in r["error"] and "bfloat16" in r["error"],
              f"bad-init: a wrong dtype is refused naming it: {r.get('error')}")
        stray = meta + [dict(meta[0], name="model.layers.9.mlp.up_proj.weight")]
        r = get(engine.init.remote(info(stray)))
        check("InvalidArgumentError" in r.get("error", "") and "layers.9" in r["error"],
              f"bad-init: a stray name is refused naming it: {r.get('error')}")
        described = get(engine.init.remote(info(meta)))
        if not check("error" not in described, f"init: {described.get('error', 'ok')}"):
            return 1
        print(f"direct (written in place): {described['direct']}", flush=True)
        print(f"staged (load_weights): {len(described['staged'])} model parameters from "
              f"{sum(len(v) for v in described['staged'].values())} trainer tensors; arena "
              f"{described['arena_bytes'] / 1e6:.1f} MB x 2", flush=True)
        check(len(described["direct"]) > 0 and len(described["staged"]) > 0, "init: both paths in use")

        def connect() -> None:
            rs = get([t.connect.remote(described, barriers, TRAINER_TIMEOUT_S) for t in trainers])
            assert all("error" not in x for x in rs), rs

        connect()
        v0 = get(engine.generate.remote(PROMPTS, MAX_TOKENS))

        # versions --------------------------------------------------------------------------
        previous, served = v0, v0
        for version in (1, 2, 3):
            b = get(engine.begin.remote(version, list(range(RANKS))))
            assert "error" not in b, b
            sends = [t.send.remote(version, b["standby"]) for t in trainers]
            during = engine.generate.remote(PROMPTS, MAX_TOKENS)  # while the trainers write
            done = engine.complete.remote(version, WAIT_S)
            result = get(done)
            sent = get(sends)
            check(all("error" not in s for s in sent), f"v{version}: every trainer rank sent: {sent}")
            check(result.get("version") == version, f"v{version}: complete: {result}")
            check(get(during) == served, f"v{version}: a generate during the transfer ran on v{version - 1}")
            served = get(engine.generate.remote(PROMPTS, MAX_TOKENS))
            expected = reference(version)
            check(served == expected, f"v{version}: greedy tokens equal a fresh load's "
                                      f"({served[0][:6]}... vs {expected[0][:6]}...)")
            check(served != previous, f"v{version}: the tokens changed from the previous version")
            previous = served
        v3 = served

        # bad-update ------------------------------------------------------------------------
        before = get(engine.describe.remote(True))["checksums"]
        r = get(engine.begin.remote(2, list(range(RANKS))))
        check("InvalidArgumentError" in r.get("error", "") and "not newer" in r["error"],
              f"bad-update: an older version is refused: {r.get('error')}")
        r = get(engine.begin.remote(4, [0]))
        check("InvalidArgumentError" in r.get("error", "") and "missing [1]" in r["error"],
              f"bad-update: a missing trainer rank is refused: {r.get('error')}")
        r = get(engine.begin.remote(4, list(range(RANKS))))
        check("error" not in r, f"bad-update: v4 armed: {r}")
        r = get(engine.begin.remote(5, list(range(RANKS))))
        check("already active" in r.get("error", "") or "in progress" in r.get("error", ""),
              f"bad-update: an update started twice is refused: {r.get('error')}")
        check(get(engine.abort.remote(4))["version"] == 3, "bad-update: v4 given up, v3 served")
        after = get(engine.describe.remote(True))["checksums"]
        check(after == before, "bad-update: no byte written into either arena")
        check(get(engine.generate.remote(PROMPTS, MAX_TOKENS)) == v3, "bad-update: still generating v3")

        # killed ----------------------------------------------------------------------------
        b = get(engine.begin.remote(5, list(range(RANKS))))
        assert "error" not in b, b
        partial = get(trainers[1].send.remote(5, b["standby"], True))
        check("error" not in partial and partial["stats"]["writes"] > 0,
              f"killed: rank 1 wrote part of v5 ({partial.get('stats', {}).get('writes')} writes)")
        ray.kill(trainers[1], no_restart=True)
        t0 = time.monotonic()
        send0 = trainers[0].send.remote(5, b["standby"])
        failed = get(engine.complete.remote(5, WAIT_S), KILLED_BOUND_S)
        check("error" in failed and "FabricTimeoutError" in failed["error"],
              f"killed: the update failed within {KILLED_BOUND_S} s "
              f"({time.monotonic() - t0:.1f} s): {failed.get('error')}")
        s0 = get(send0, KILLED_BOUND_S)
        check("error" in s0, f"killed: rank 0's send failed too: {s0.get('error')}")
        check(get(engine.describe.remote())["version"] == 3, "killed: version 3 still reported")
        check(get(engine.generate.remote(PROMPTS, MAX_TOKENS)) == v3, "killed: still generating v3")

        # recovered -------------------------------------------------------------------------
        trainers[1] = actors.TrainerActor.remote(1, RANKS, base_dir)
        started.append(trainers[1])
        barriers[:] = [h[1] for h in get([t.hello.remote() for t in trainers], START_S)]
        connect()
        b = get(engine.begin.remote(6, list(range(RANKS))))
        assert "error" not in b, b
        sends = [t.send.remote(6, b["standby"]) for t in trainers]
        result = get(engine.complete.remote(6, WAIT_S))
        sent = get(sends)
        check(result.get("version") == 6 and all("error" not in s for s in sent),
              f"recovered: v6 complete: {result}; trainers: {sent}")
        served = get(engine.generate.remote(PROMPTS, MAX_TOKENS))
        check(served == reference(6), "recovered: v6 greedy tokens equal a fresh load's")
        print(f"last update: engine {result.get('stats')}, trainer 0 {sent[0].get('stats')}", flush=True)
    except Exception:  # noqa: BLE001 - a failure, reported as one
        traceback.print_exc()
        check.failures.append("exception")
    finally:
        for a in started:
            try:
                ray.kill(a)
            except Exception:  # noqa: BLE001
                pass
        ray.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    if check.failures:
        print(f"FAILED: {check.failures}", flush=True)
        return 1
    print("PASSED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
