#!/usr/bin/env python3
"""Model benchmark: tokens/s of a transformers MoE model with expert parallelism over
fabric_lib.moe, against the same EP block over torch.distributed all_to_all (gloo), on the same
processes, model and prompts, in one run.

Per EP size it spawns EP ranks (rendezvous through a TCPStore on 127.0.0.1). Each rank builds the
same random-weight Qwen3-MoE (tests/moe/model/models.py, larger shapes here), holds three copies
(unchanged, EP over fabric, EP over gloo: tools/moe/gloo_ep.py) and, --repeats times, generates
greedily on its own batch with each, all ranks starting together after a gloo barrier. tokens/s
= all ranks' generated tokens / the slowest rank's generate time; the median over repeats is
reported. "none" is every rank running the unchanged model on its batch at the same time (no
communication, every expert local). It is no ceiling: transformers' expert loop pays per expert
hit, and an EP rank loops over its E/N experts only, with every rank's tokens for them. The
three must generate the same tokens (the run fails otherwise).

    PYTHONPATH=build/default/python ~/.cache/fabric-lib/vllm-venv/bin/python tools/moe/model_bench.py \\
        --ep 2 4 --json docs/moe/model-bench.json
    /usr/bin/python3 tools/moe/model_bench.py --plot-from docs/moe/model-bench.json --plot docs/moe/model-bench.png
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import multiprocessing as mp
import os
import socket
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "..", "tests", "moe", "model")
VARIANTS = ("none", "fabric", "gloo")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Timed:
    """A transport that records how long each dispatch and combine call took (ms), waits included."""

    def __init__(self, inner) -> None:
        self.inner, self.dispatch_ms, self.combine_ms = inner, [], []
        for name in ("num_experts", "layout", "num_local_experts", "combine_dtype", "out_dtype"):
            if hasattr(inner, name):
                setattr(self, name, getattr(inner, name))

    def dispatch(self, x, ids, weights):
        t0 = time.perf_counter()
        r = self.inner.dispatch(x, ids, weights)
        self.dispatch_ms.append((time.perf_counter() - t0) * 1e3)
        return r

    def combine(self, y, handle, out=None):
        t0 = time.perf_counter()
        r = self.inner.combine(y, handle, out=out)
        self.combine_ms.append((time.perf_counter() - t0) * 1e3)
        return r


def rank_main(rank: int, world: int, port: int, args, q) -> None:
    try:
        import torch
        import torch.distributed as dist
        import transformers

        transformers.logging.set_verbosity_error()
        torch.set_num_threads(1)
        sys.path[:0] = [MODELS, HERE]
        import models
        from gloo_ep import GlooEp

        from fabric_lib.moe import Buffer, expert_parallel

        store = dist.TCPStore("127.0.0.1", port, world, rank == 0, timeout=datetime.timedelta(seconds=300))
        dist.init_process_group("gloo", store=dist.PrefixStore("gloo", store), rank=rank, world_size=world)
        model, block_type, num_experts, top_k = models.build(
            "qwen3_moe", hidden=args.hidden, layers=args.layers, num_experts=args.experts,
            num_experts_per_tok=args.top_k, moe_intermediate_size=args.moe_intermediate)
        tokens_per_call = args.batch * args.prompt
        buf = Buffer(rank, world, num_experts, args.hidden, tokens_per_call, top_k, store=store,
                     key="model_bench", x_dtype="f32", combine_dtype="f32", out_dtype="f32",
                     timeout_ms=60000, request_timeout_ms=60000)
        runs = {"none": model}
        timed = {"fabric": Timed(buf), "gloo": Timed(GlooEp(rank, world, num_experts, args.hidden))}
        for v, transport in timed.items():
            runs[v] = copy.deepcopy(model)
            expert_parallel(runs[v], transport, block_type)
        g = torch.Generator().manual_seed(1000 + rank)
        ids = torch.randint(0, models.VOCAB, (args.batch, args.prompt), generator=g)
        seconds = {v: [] for v in VARIANTS}
        tokens = {}
        for rep in range(args.repeats + 1):  # the first is warm-up
            if rep == 1:  # the calls of the timed repeats only
                for t in timed.values():
                    t.dispatch_ms.clear()
                    t.combine_ms.clear()
            for v in VARIANTS:
                dist.barrier()
                t0 = time.perf_counter()
                got, _ = models.generate(runs[v], ids, args.new_tokens)
                t1 = time.perf_counter()
                if rep:
                    seconds[v].append(t1 - t0)
                tokens[v] = got
        same = {v: bool(torch.equal(tokens[v], tokens["none"])) for v in VARIANTS}
        buf.quiesce()
        buf.close()
        dist.destroy_process_group()
        calls = {f"{v}_{step}_ms_p50": statistics.median(getattr(t, f"{step}_ms"))
                 for v, t in timed.items() for step in ("dispatch", "combine")}
        q.put((rank, "ok", {"seconds": seconds, "same_tokens": same, "calls": calls,
                            "generated": int(tokens["none"].numel())}))
    except BaseException as e:  # noqa: BLE001 - reported
        q.put((rank, f"{type(e).__name__}: {e}", traceback.format_exc()))


def run_ep(args, world: int) -> dict:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, world, port, args, q)) for r in range(world)]
    for p in procs:
        p.start()
    results = {}
    try:
        for _ in procs:
            rank, status, extra = q.get(timeout=args.timeout)
            if status != "ok":
                raise RuntimeError(f"rank {rank}: {status}\n{extra}")
            results[rank] = extra
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    row = {"ep": world, "generated_tokens": sum(r["generated"] for r in results.values())}
    for v in VARIANTS:
        per_rep = [max(results[r]["seconds"][v][i] for r in results) for i in range(args.repeats)]
        row[f"{v}_tokens_per_s"] = [row["generated_tokens"] / s for s in per_rep]
        row[f"{v}_tokens_per_s_median"] = statistics.median(row[f"{v}_tokens_per_s"])
        row[f"{v}_same_tokens"] = all(results[r]["same_tokens"][v] for r in results)
    row["fabric_over_gloo"] = row["fabric_tokens_per_s_median"] / row["gloo_tokens_per_s_median"]
    # Per call inside the model (prefill and decode calls together): the median over ranks of
    # each rank's median.
    for key in results[0]["calls"]:
        row[key] = statistics.median(results[r]["calls"][key] for r in results)
    return row


def plot(rows, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.25
    for i, v in enumerate(VARIANTS):
        ax.bar([r["ep"] + (i - 1) * width for r in rows], [r[f"{v}_tokens_per_s_median"] for r in rows],
               width, label={"none": "no EP (all experts local)", "fabric": "EP over fabric_lib.moe",
                             "gloo": "EP over gloo all_to_all"}[v])
    ax.set_xticks([r["ep"] for r in rows])
    ax.set_xlabel("EP (processes)")
    ax.set_ylabel("generated tokens/s (all ranks)")
    ax.set_title("Qwen3-MoE (random weights), greedy generation, CPU")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ep", type=int, nargs="+", default=[2, 4])
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--experts", type=int, default=16)
    p.add_argument("--top-k", type=int, default=4)
    p.add_argument("--moe-intermediate", type=int, default=256)
    p.add_argument("--batch", type=int, default=8, help="sequences per rank")
    p.add_argument("--prompt", type=int, default=16, help="prompt tokens per sequence")
    p.add_argument("--new-tokens", type=int, default=16)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--json", default="")
    p.add_argument("--plot", default="")
    p.add_argument("--plot-from", default="", help="only plot this JSON (an interpreter with matplotlib, "
                   "e.g. /usr/bin/python3, when the venv has none)")
    args = p.parse_args()
    if args.plot_from:
        with open(args.plot_from) as f:
            plot(json.load(f)["rows"], args.plot)
        return 0
    rows = []
    for world in args.ep:
        row = run_ep(args, world)
        rows.append(row)
        print(f"EP {world}: tokens/s none {row['none_tokens_per_s_median']:.0f}, fabric "
              f"{row['fabric_tokens_per_s_median']:.0f}, gloo {row['gloo_tokens_per_s_median']:.0f} "
              f"(fabric/gloo {row['fabric_over_gloo']:.2f}); same tokens: fabric {row['fabric_same_tokens']}, "
              f"gloo {row['gloo_same_tokens']}; per call p50 ms: fabric dispatch {row['fabric_dispatch_ms_p50']:.2f} "
              f"combine {row['fabric_combine_ms_p50']:.2f}, gloo dispatch {row['gloo_dispatch_ms_p50']:.2f} "
              f"combine {row['gloo_combine_ms_p50']:.2f}", flush=True)
    shape = {k: getattr(args, k) for k in ("hidden", "layers", "experts", "top_k", "moe_intermediate", "batch",
                                            "prompt", "new_tokens", "repeats")}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"shape": shape, "rows": rows, "load_average": os.getloadavg()}, f, indent=1)
    if args.plot:
        try:
            plot(rows, args.plot)
        except ImportError:
            print(f"no matplotlib here: plot with --plot-from {args.json or '<json>'} --plot {args.plot}")
    return 0 if all(r["fabric_same_tokens"] and r["gloo_same_tokens"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
