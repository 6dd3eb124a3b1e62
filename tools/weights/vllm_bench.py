"""Update time of a live CPU vLLM, fabric backend vs the usual RL recipe, in one run
(docs/weights.md, "vLLM backend: figures"). Run in the vLLM venv (scripts/vllm-venv.sh):

    PYTHONPATH=build/default/python ~/.cache/fabric-lib/vllm-venv/bin/python \\
        tools/weights/vllm_bench.py --hidden 1024 --layers 4 --reps 5 [--provider shm] [--json out.json]

Ray (local, single node, all on 127.0.0.1: live_test.env()) starts one vLLM engine actor (TP 1) and 2 trainer actors, each holding its
FSDP half (dim 0) of every float32 parameter. Per rep:
  fabric    engine arm -> both ranks write their own halves into the standby arena -> wait ->
            swap (staged tensors through load_weights in vLLM's layerwise reload).
  baseline  per parameter: all-gather of the halves (full_tensor()) over gloo, trainer rank 0
            broadcasts it over a gloo group with the engine's worker, which loads it with
            load_weights (layerwise reload), as vLLM's nccl engine does.
Both measured at the driver, from the first call to the engine serving the new weights."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "..", "tests", "weights", "vllm")
sys.path.insert(0, TESTS)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--provider", default="tcp", help="fabric provider (tcp: 127.0.0.1; shm)")
    ap.add_argument("--json")
    a = ap.parse_args()

    import live_test
    import ray

    import actors
    import model as m

    root = tempfile.mkdtemp(prefix="fabric-vllm-bench-")
    os.environ.update(live_test.env())
    os.environ["PYTHONPATH"] = os.pathsep.join([live_test.plugin_dir(root), TESTS, os.environ.get("PYTHONPATH", "")])
    base_dir = os.path.join(root, "model")
    m.make_model(base_dir, hidden=a.hidden, layers=a.layers, intermediate=a.hidden * 11 // 4 // 64 * 64,
                 vocab=a.vocab)
    base = m.base_weights(base_dir)
    nbytes = sum(w.nbytes for w in base.values())
    print(f"model: {nbytes / 1e6:.1f} MB float32, {len(base)} tensors", flush=True)
    ray.init(address="local", num_cpus=4, include_dashboard=False, _node_ip_address="127.0.0.1",
             object_store_memory=256 << 20, log_to_driver=False,
             runtime_env={"env_vars": {**live_test.env(), "PYTHONPATH": os.environ["PYTHONPATH"]}})
    out: dict = {"model_bytes": nbytes, "hidden": a.hidden, "layers": a.layers, "vocab": a.vocab,
                 "trainer_ranks": 2, "provider": a.provider, "fabric": [], "baseline": []}
    try:
        def get(ref, timeout=600):
            return ray.get(ref, timeout=timeout)

        engine = actors.BenchEngineActor.remote(base_dir)
        trainers = [actors.BenchTrainerActor.remote(r, 2, base_dir, a.provider) for r in range(2)]
        hellos = get([t.hello.remote() for t in trainers])
        meta, barriers = hellos[0][0], [h[1] for h in hellos]
        described = get(engine.init.remote({"trainer": meta, "mesh": [["fsdp", 2]], "provider": a.provider}))
        assert "error" not in described, described
        out["plan_s"] = described["stats"]["plan_s"]
        out["direct"], out["staged"] = len(described["direct"]), len(described["staged"])
        assert all("error" not in x for x in get([t.connect.remote(described, barriers, 60.0) for t in trainers]))
        get([t.prepare.remote() for t in trainers])
        pf, pb = free_port(), free_port()
        get([trainers[0].gloo_join.remote(pf, pb), trainers[1].gloo_join.remote(pf, pb), engine.gloo_join.remote(pb)])
        prompts = [[1, 2, 3, 4]]
        for rep in range(a.reps):
            v = rep + 1
            t0 = time.monotonic()
            b = get(engine.begin.remote(v, [0, 1]))
            sends = [t.send_prepared.remote(v, b["standby"]) for t in trainers]
            r = get(engine.complete.remote(v, 300.0))
            t1 = time.monotonic()
            sent = get(sends)
            assert r.get("version") == v, r
            st = r["stats"]
            row = {"total_s": t1 - t0, "transfer_s": st["transfer_s"], "load_weights_s": st["load_weights_s"],
                   "pause_s": st["swap_s"], "post_s": max(s["stats"]["post_s"] for s in sent),
                   "prepare_s": max(s["stats"]["prepare_s"] for s in sent),
                   "send_s": max(s["send_s"] for s in sent)}
            out["fabric"].append(row)
            print(f"fabric   rep {rep}: {row}", flush=True)
            t0 = time.monotonic()
            recv = engine.gloo_receive.remote(meta)
            sends = [t.gloo_send.remote() for t in trainers]
            load_s = get(recv)
            t1 = time.monotonic()
            get(sends)
            row = {"total_s": t1 - t0, "engine_s": load_s, "pause_s": load_s}
            out["baseline"].append(row)
            print(f"baseline rep {rep}: {row}", flush=True)
            get(engine.generate.remote(prompts, 2))
        bf = min(r["total_s"] for r in out["fabric"])
        bb = min(r["total_s"] for r in out["baseline"])
        out["best"] = {"fabric_s": bf, "baseline_s": bb, "fabric_GBps": nbytes / bf / 1e9,
                       "baseline_GBps": nbytes / bb / 1e9, "speedup": bb / bf}
        print(json.dumps(out["best"]), flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
    finally:
        ray.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
