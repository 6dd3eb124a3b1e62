"""Three processes, each with ONE fabric_lib.Engine that KV (ranks 0 and 1 prefill, rank 2
decodes), a weights update (trainer rank 0 -> inference ranks 1 and 2, each version acknowledged
by immediates) and MoE dispatch/combine among all three share, running at the same time: every
byte is checked in the ranks against a reference, every count is exact, and every immediate an
engine received was counted by the one workload it was meant for (a workload that took another's
would leave a shortfall or a surplus). tests/workloads (C++) does the same with C++ workloads."""

from __future__ import annotations

from typing import Any

import one_engine_peers as oe
from peers import Peer


def relay(peers: list[Peer]) -> list[dict[str, Any]]:
    """Answers the ranks' all_gathers (each rank makes the same ones, in the same order) until
    every rank reports; every receive is bounded (Peer.recv)."""
    while True:
        msgs = [p.recv() for p in peers]
        kinds = {m[0] for m in msgs}
        if kinds == {"gather"}:
            everyone = [m[1] for m in msgs]
            for p in peers:
                p.send(everyone)
        elif kinds == {"report"}:
            return [m[1] for m in msgs]
        else:
            raise AssertionError(f"the ranks are out of step: {[m[0] for m in msgs]}")


def test_kv_weights_and_moe_share_each_engine_with_every_count_exact(provider: str) -> None:
    peers = [Peer(oe.rank_role, provider=provider, rank=r) for r in range(oe.RANKS)]
    try:
        reports = relay(peers)
        for p in peers:
            p.send("done")
        for p in peers:
            p.close()
    finally:
        for p in peers:
            if p.proc.is_alive():
                p.proc.kill()
    for rank, r in enumerate(reports):
        where = f"rank {rank}: {r}"
        for workload in ("kv", "weights", "moe"):
            assert r[workload][1] == "", where
        # KV: the receiver got every request of both senders; each sender served all of its own.
        assert r["kv"][0] == (2 * oe.KV_REQUESTS if rank == oe.KV_RECEIVER else oe.KV_REQUESTS), where
        assert r["weights"][0] == oe.WEIGHTS_VERSIONS, where
        assert r["moe"][0] == oe.MOE_ITERATIONS, where
        assert r["moe_stray"] == 0, where
        assert r["imms_received"] > 0, where
        assert r["imms_received"] == r["imms_claimed"], where
