"""Ranks that join and leave a running EP model (part of ctest moe.model_ep).

Three processes, members 0, 1, 2, each generating greedily on its own batch with the Qwen3-MoE
model, 4 tokens per phase:

    phase 1: members 0, 1      (EP 2, expert e in slot e)
    phase 2: member 2 joins    (EP 3, the caller places expert e in slot E-1-e)
    phase 3: member 1 leaves   (EP 2 of members 0 and 2, expert e in slot (e+5) mod E)

Member 2 asks to join through the store and the running members admit it between two generate
calls; member 1 announces that it leaves after phase 2. At each change every member of the new
group builds a new Buffer (the arena's shape depends on the world size) and moves its blocks
onto it with ExpertParallelMoe.reshard, taking the experts of its new slots; the members that
were already running continue their sequences from their KV cache. Each member's tokens over
all its phases must equal the single-process model's, generated in one go.
"""

from __future__ import annotations

import copy
import datetime
import sys
import traceback

PHASES = {1: [0, 1], 2: [0, 1, 2], 3: [0, 2]}
TOKENS_PER_PHASE = 4


def placement(phase: int, num_experts: int) -> list[int]:
    if phase == 2:
        return [num_experts - 1 - e for e in range(num_experts)]
    if phase == 3:
        return [(e + 5) % num_experts for e in range(num_experts)]
    return list(range(num_experts))


def member_main(ident: int, port: int, here: str, max_tokens: int, tolerance: float, q) -> None:
    try:
        import torch
        import torch.distributed as dist
        import transformers

        transformers.logging.set_verbosity_error()
        torch.set_num_threads(1)
        sys.path.insert(0, here)
        import models
        from fabric_lib.moe import Buffer, ExpertParallelMoe, expert_parallel

        store = dist.TCPStore("127.0.0.1", port, len(PHASES[2]), ident == 0,
                              timeout=datetime.timedelta(seconds=120))
        mine = [p for p, members in PHASES.items() if ident in members]
        model, block_type, num_experts, top_k = models.build("qwen3_moe")
        ids = models.prompts(ident)
        want, want_logits = models.generate(model, ids, TOKENS_PER_PHASE * len(mine))
        full = [(b.experts.gate_up_proj, b.experts.down_proj) for b in model.modules()
                if isinstance(b, block_type)]
        ep = copy.deepcopy(model)
        if ident == 2:
            store.set("elastic/join", "2")  # asks the running group to admit it
        out, seq, logits, rows = None, ids, [], {}
        for phase in mine:
            members = PHASES[phase]
            if phase == 2 and ident != 2:
                store.get("elastic/join")  # the running members see the request (bounded wait)
            if phase == 3:
                store.get("elastic/leave")
            buf = Buffer(members.index(ident), len(members), num_experts, models.HIDDEN, max_tokens, top_k,
                         store=store, key=f"elastic/{phase}", x_dtype="f32", combine_dtype="f32",
                         out_dtype="f32", timeout_ms=30000, request_timeout_ms=10000)
            transport = models.Counting(buf)
            where = placement(phase, num_experts)
            blocks = [m for m in ep.modules() if isinstance(m, ExpertParallelMoe)]
            if not blocks:
                assert expert_parallel(ep, transport, block_type, where) == models.LAYERS
            for block, (gate_up, down) in zip(blocks, full):
                block.reshard(transport, gate_up, down, where)
            out = models.generate_more(ep, seq, TOKENS_PER_PHASE, out.past_key_values if out else None)
            seq = out.sequences
            logits.extend(out.scores)
            rows[phase] = transport.rows
            buf.quiesce()  # every member's last WRITE landed before anyone closes
            stats = buf.stats()
            assert stats["stray_immediates"] == 0 and stats["submissions"] == stats["completions"], stats
            buf.close()
            if ident == 1 and phase == 2:
                store.set("elastic/leave", "1")
        got = seq[:, ids.shape[1]:]
        diff = float((torch.stack(logits) - want_logits).abs().max())
        assert torch.equal(got, want), f"member {ident}: tokens differ:\n{got}\n{want}"
        assert diff <= tolerance, f"member {ident}: logits differ by {diff}"
        assert all(r > 0 for r in rows.values()), f"member {ident}: a phase without rows here: {rows}"
        q.put((ident, "ok", [dict(kind="qwen3_moe", scenario=f"phases {mine}", tokens=list(got.shape),
                                  max_logit_diff=diff, rows=sum(rows.values()), dropped=0, empty=0)]))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        q.put((ident, f"{type(e).__name__}: {e}", traceback.format_exc()))
