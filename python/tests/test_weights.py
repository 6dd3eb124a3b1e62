"""RL weight transfer between real processes: 4 trainers (FSDP-sharded dense parameters and
EP-sharded experts: two mesh groups) -> 2 inference ranks (TP / EP) with fused qkv, gate_up
and w13, a transposed lm_head and FP8 targets. The inference arenas must equal, byte for byte,
a reference computed in this process with numpy and ml_dtypes."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest

import fabric_lib as fl

pytest.importorskip("torch", reason="the trainers unshard over torch.distributed (gloo)")
pytest.importorskip("ml_dtypes", reason="the FP8 reference is ml_dtypes (pip install ml_dtypes)")

from fabric_lib.weights import NameRule, SourceParam, plan, plan_input_json  # noqa: E402
from peers import Peer  # noqa: E402
import weights_peers as wp  # noqa: E402

TIMEOUT_S = 4.0  # the executor's bound on every wait (barriers included)


def schedule():
    return plan(plan_input_json(wp.TRAINER, wp.INFERENCE, wp.RULES), max_chunk_bytes=40 << 10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_arena(sched, rank: int, arena: bytes, version: int) -> None:
    g = wp.global_values(version)
    for e in sched.arena(rank):
        data, scale = wp.reference_entry(e.target, rank, g)
        got = arena[e.offset:e.offset + e.nbytes]
        assert len(data) == e.nbytes, e.target
        if got != data:
            diff = np.flatnonzero(np.frombuffer(got, np.uint8) != np.frombuffer(data, np.uint8))
            pytest.fail(f"version {version}, rank {rank}, {e.target}: {diff.size} bytes differ, first at {diff[0]}")
        assert arena[e.scale_offset:e.scale_offset + e.scale_nbytes] == scale, f"{e.target} scales"


@pytest.mark.parametrize("provider", ["shm", "tcp"])
def test_four_trainers_update_two_inference_ranks_and_a_killed_trainer_fails_the_update(provider):
    sched = schedule()
    port = free_port()
    infs = [Peer(wp.inference_role, provider=provider, schedule_json=sched.json, rank=r) for r in range(2)]
    trs = [Peer(wp.trainer_role, provider=provider, schedule_json=sched.json, rank=t, port=port,
                timeout_s=TIMEOUT_S, victim=t == 3) for t in range(4)]
    try:
        arenas = [p.recv() for p in infs]
        barriers = [p.recv() for p in trs]
        for p in trs:
            p.send((arenas, barriers))
        for version in (1, 2, 3):
            for p in infs:
                p.send(("expect", version))
                assert p.recv() == "armed"
            for p in trs:
                p.send(("update", version, False))
            for p in trs:
                status, stats = p.recv()
                assert status == "ok", stats
            for r, p in enumerate(infs):
                p.send(("wait", version, 30.0))
                ok, complete, arena = p.recv()
                assert ok and complete == version
                check_arena(sched, r, arena, version)

        # Version 4: trainer 3 is killed once its dense writes are out, before the barrier.
        for p in infs:
            p.send(("expect", 4))
            assert p.recv() == "armed"
        for t, p in enumerate(trs):
            p.send(("update", 4, t == 3))
        assert trs[3].recv()[0] == "dense sent"
        trs[3].proc.kill()
        t0 = time.monotonic()
        for p in trs[:3]:
            status, why = p.recv()
            # The barrier times out, or (tcp) the barrier's write to the dead peer fails first.
            assert status == "failed", why
            assert "barrier after mesh group 0 of version 4" in why or "ProviderError" in why, why
        assert time.monotonic() - t0 < 3 * TIMEOUT_S
        for p in infs:  # both ranks wait at once: each wait runs its whole bound
            p.send(("wait", 4, 2 * TIMEOUT_S))
        for p in infs:
            ok, complete, _ = p.recv()
            assert not ok and complete == 3  # the previous complete version stays the one reported
        trs[3].proc.join(30)
        for p in trs[:3]:
            p.send(("done",))
        for p in infs:
            p.send(("done",))
        for p in trs[:3] + infs:
            p.close()
    finally:
        for p in infs + trs:
            if p.proc.is_alive():
                p.proc.kill()


def test_bad_metadata_is_refused_before_anything_is_sent():
    tr = wp.TRAINER
    bad_shape = type(tr)(tr.mesh, tr.groups, [p if p.name != "k" else SourceParam("k", [200, 256], "bfloat16", p.placements, "dense")
                                              for p in tr.params])
    with pytest.raises(fl.InvalidArgumentError, match=r"target 'qkv' has shape \[1024, 256\] but its sources make \[968, 256\]"):
        plan(plan_input_json(bad_shape, wp.INFERENCE, wp.RULES))
    stray = type(tr)(tr.mesh, tr.groups, tr.params + [SourceParam("stray", [4], "bfloat16", ["R"], "dense")])
    with pytest.raises(fl.InvalidArgumentError, match="trainer parameter 'stray' has no target"):
        plan(plan_input_json(stray, wp.INFERENCE, wp.RULES))
    with pytest.raises(fl.InvalidArgumentError, match="inference parameter 'norm' has no source"):
        plan(plan_input_json(tr, wp.INFERENCE, [r for r in wp.RULES if r.target != "norm"]))
    with pytest.raises(fl.InvalidArgumentError, match="source 'kk' is not a trainer parameter"):
        plan(plan_input_json(tr, wp.INFERENCE, [NameRule("qkv", ["q", "kk", "v"])] + wp.RULES[1:]))


def test_schedule_says_its_bound_and_prediction():
    from fabric_lib.weights import simulate

    sched = schedule()
    p = sched.prediction
    assert p["bound_s"] == max(p["max_nic_in_bytes"], p["max_nic_out_bytes"]) / p["nic_bytes_per_s"]
    sim = simulate(sched, 1e9)
    assert sim["bound_s"] <= sim["group_bound_s"] * 1.0000001 <= sim["time_s"] * 1.0000001
