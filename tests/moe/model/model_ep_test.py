"""ctest moe.model_ep: a transformers MoE model with its experts spread over N processes.

Each rank builds the same random-weight model, generates greedily on its own batch with the
unchanged model (the single-process reference), then replaces every sparse-MoE block by
fabric_lib.moe.ExpertParallelMoe on one shared Buffer (fp32 throughout) and generates again:
the tokens must be equal and the logits within 1e-4. Under three routings: the model's own
router, all tokens to rank 0's experts (skewed), and slots without an expert (fewer than k
valid experts, some tokens none). A control shows the check can fail: the same model with its
experts permuted generates different tokens. In bf16 (model and Buffer), one forward pass: the
EP logits within 2^-3 of max |logit| of the bf16 model's, and no less accurate against fp32
than the bf16 model itself (2.5x its error + 2^-6). Then elastic.py: a rank joins the running model,
another leaves, the caller moves experts between ranks, and every sequence still equals the
single-process model's.

    PYTHONPATH=build/default/python <venv>/bin/python tests/moe/model/model_ep_test.py --ep 2 4
"""

from __future__ import annotations

import argparse
import copy
import datetime
import multiprocessing as mp
import os
import socket
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
LOGIT_TOLERANCE = 1e-4  # fp32: only the order of the k-sum differs from transformers' loop
# bf16, of max |logit|: transformers rounds each weighted expert row and each partial sum to bf16,
# the combine sums in fp32 and rounds once. Through 4 random layers that is bf16 noise of the
# size of the model's own bf16 error against fp32 (measured 1e-2 to 7.5e-2 of max |logit|, EP
# against the bf16 model at most 5.6e-2). So: EP within 2^-3 of the bf16 model, and EP's error
# against fp32 at most 2.5x the bf16 model's own plus 2^-6.
BF16_TOLERANCE = 2.0 ** -3
NEW_TOKENS = 8
MAX_TOKENS = 64         # per rank and call: the largest prefill batch is 3 x 9 tokens
RESULT_TIMEOUT_S = 300  # every rank's report, after all spawned


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scenarios(world: int, num_experts: int, top_k: int):
    """(name, Routing arguments or None for the model's own router)."""
    per_rank = num_experts // world
    out = [("model router", None)]
    if top_k <= per_rank:
        out.append(("skewed to rank 0", dict(skew=(0, per_rank))))
    out.append(("fewer than k experts", dict(drop=True)))
    return out


def bf16_logits(rank: int, world: int, store, kind: str, base, block_type, ids) -> dict:
    """The model in bf16, one forward pass: EP logits within BF16_TOLERANCE of the model's."""
    import torch

    import models
    from fabric_lib.moe import Buffer, expert_parallel

    with torch.no_grad():
        exact = base(ids).logits  # fp32
    model = copy.deepcopy(base).to(torch.bfloat16)
    with torch.no_grad():
        want = model(ids).logits.float()
    buf = Buffer(rank, world, model.config.num_experts if hasattr(model.config, "num_experts")
                 else model.config.num_local_experts, models.HIDDEN, MAX_TOKENS,
                 model.config.num_experts_per_tok, store=store, key=f"model_ep/{kind}/bf16", x_dtype="bf16",
                 combine_dtype="bf16", out_dtype="f32", timeout_ms=30000, request_timeout_ms=10000)
    assert expert_parallel(model, buf, block_type) == models.LAYERS
    with torch.no_grad():
        got = model(ids).logits.float()
    buf.quiesce()
    buf.close()
    scale = float(exact.abs().max())
    rel = float((got - want).abs().max()) / scale
    own = float((want - exact).abs().max()) / scale   # transformers' own bf16 error
    ep_err = float((got - exact).abs().max()) / scale
    assert rel <= BF16_TOLERANCE, f"{kind}, bf16: logits off by {rel:.2e} of max |logit|"
    assert ep_err <= 2.5 * own + 2.0 ** -6, f"{kind}, bf16: EP error {ep_err:.2e} vs the model's own {own:.2e}"
    return dict(kind=kind, scenario="bf16 logits, 1 pass", tokens=list(ids.shape), max_logit_diff=rel,
                rows=0, dropped=0, empty=0, note=f"(of max |logit|; vs fp32: EP {ep_err:.1e}, "
                                                 f"transformers bf16 {own:.1e})")


def rank_main(rank: int, port: int, world: int, kinds: list[str], q) -> None:
    try:
        import torch
        import torch.distributed as dist
        import transformers

        transformers.logging.set_verbosity_error()
        torch.set_num_threads(1)
        sys.path.insert(0, HERE)
        import models
        from fabric_lib.moe import Buffer, expert_parallel

        store = dist.TCPStore("127.0.0.1", port, world, rank == 0, timeout=datetime.timedelta(seconds=120))
        ids = models.prompts(rank)
        results = []
        for kind in kinds:
            base, block_type, num_experts, top_k = models.build(kind)
            norm = bool(getattr(base.config, "norm_topk_prob", True))
            buf = Buffer(rank, world, num_experts, models.HIDDEN, MAX_TOKENS, top_k, store=store,
                         key=f"model_ep/{kind}", x_dtype="f32", combine_dtype="f32", out_dtype="f32",
                         timeout_ms=30000, request_timeout_ms=10000)
            transport = models.Counting(buf)
            for name, routing in scenarios(world, num_experts, top_k):
                model = copy.deepcopy(base)
                routers = []
                if routing is not None:
                    routers = models.install_routing(model, block_type, num_experts=num_experts,
                                                     top_k=top_k, norm=norm, **routing)
                want, want_logits = models.generate(model, ids, NEW_TOKENS)
                ep = copy.deepcopy(model)
                routers = [m for m in ep.modules() if isinstance(m, models.Routing)]
                for r in routers:
                    r.dropped = r.empty = 0
                assert expert_parallel(ep, transport, block_type) == models.LAYERS
                rows_before = transport.rows
                got, got_logits = models.generate(ep, ids, NEW_TOKENS)
                diff = float((got_logits - want_logits).abs().max())
                assert torch.equal(got, want), f"{kind}, {name}: tokens differ:\n{got}\n{want}"
                assert diff <= LOGIT_TOLERANCE, f"{kind}, {name}: logits differ by {diff}"
                info = dict(kind=kind, scenario=name, tokens=list(got.shape), max_logit_diff=diff,
                            rows=transport.rows - rows_before,
                            dropped=sum(r.dropped for r in routers), empty=sum(r.empty for r in routers))
                if routing and "skew" in routing:
                    assert (info["rows"] > 0) == (rank == 0), f"{kind}, {name}: rank {rank} got {info['rows']} rows"
                if routing and routing.get("drop"):
                    assert info["dropped"] > 0 and info["empty"] > 0, f"{kind}, {name}: nothing dropped: {info}"
                if routing is None:
                    # The control: a token at the wrong expert changes the generation.
                    wrong = copy.deepcopy(model)
                    models.permute_experts(wrong, block_type)
                    assert not torch.equal(models.generate(wrong, ids, NEW_TOKENS)[0], want), \
                        f"{kind}: permuting the experts changed no token; the check is too weak"
                results.append(info)
            results.append(bf16_logits(rank, world, store, kind, base, block_type, ids))
            buf.quiesce()
            stats = buf.stats()
            assert stats["stray_immediates"] == 0 and stats["submissions"] == stats["completions"], stats
            buf.close()
        q.put((rank, "ok", results))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        q.put((rank, f"{type(e).__name__}: {e}", traceback.format_exc()))


def run(world: int, target, args: tuple) -> dict:
    """Starts `world` processes target(rank, port, *args, q); every rank's report, or why none."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=target, args=(r, port, *args, q)) for r in range(world)]
    for p in procs:
        p.start()
    results = {}
    deadline = time.monotonic() + RESULT_TIMEOUT_S
    try:
        while len(results) < world:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                rank, status, extra = q.get(timeout=min(left, 5))
            except Exception:  # queue.Empty: check that nobody died silently
                dead = [r for r, p in enumerate(procs) if not p.is_alive() and r not in results and p.exitcode != 0]
                if dead:
                    results.update({r: (f"exited with {procs[r].exitcode} without a report", "") for r in dead})
                continue
            results[rank] = (status, extra)
    finally:
        for p in procs:
            p.join(timeout=20)
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    for r in range(world):
        results.setdefault(r, (f"no report within {RESULT_TIMEOUT_S} s", ""))
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ep", type=int, nargs="*", default=[2, 4])
    ap.add_argument("--kinds", nargs="+", default=["qwen3_moe", "qwen2_moe"])
    ap.add_argument("--no-elastic", action="store_true", help="skip the join/leave run")
    args = ap.parse_args()
    passed = failed = 0
    runs = [(f"ep={world}", world, rank_main, (world, args.kinds)) for world in args.ep]
    if not args.no_elastic:
        sys.path.insert(0, HERE)
        import elastic

        runs.append(("elastic", 3, elastic.member_main, (HERE, MAX_TOKENS, LOGIT_TOLERANCE)))
    for label, world, target, targs in runs:
        start = time.monotonic()
        results = run(world, target, targs)
        for rank, (status, extra) in sorted(results.items()):
            if status != "ok":
                failed += 1
                print(f"FAIL {label} rank {rank}: {status}\n{extra}")
                continue
            passed += len(extra)  # one per (model, routing) this rank checked
            for info in extra:
                print(f"ok   {label} rank {rank} {info['kind']:9} {info['scenario']:22} tokens {info['tokens']} "
                      f"rows here {info['rows']:4} dropped {info['dropped']:3} empty {info['empty']:3} "
                      f"max |dlogit| {info['max_logit_diff']:.2e} {info.get('note', '')}")
        print(f"{label}: {time.monotonic() - start:.1f} s")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
