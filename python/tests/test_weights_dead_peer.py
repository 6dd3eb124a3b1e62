"""A trainer rank killed between updates costs its peers that update, not their engine: the
surviving trainer's same Engine completes the next version with a new peer.

On tcp the survivor's barrier to the dead rank used to stay at the head of its engine's pending
queue after it timed out (the provider answered EAGAIN for good), and every later request of that
engine waited behind it: the next update failed on both trainers."""

from __future__ import annotations

import numpy as np
import pytest

import fabric_lib as fl
from fabric_lib.weights import Receiver, Trainer, reserve_update_imms

import dead_trainer_peers as dt
from peers import Peer


@pytest.mark.parametrize("provider", ["shm", "tcp"])
def test_the_next_update_after_a_killed_trainer_completes_on_the_same_engine(provider):
    sched = dt.schedule()
    inference = fl.Engine(provider)
    receiver = Receiver(inference, sched, 0)
    engine = fl.Engine(provider)
    word = np.zeros(64, np.uint8)
    own_word = bytes(engine.reg_mr(word)[1])
    own_imms = reserve_update_imms(engine)
    own_block = (own_imms.first, own_imms.count)
    peers: list[Peer] = []

    def join() -> tuple[Peer, Trainer]:
        peer = Peer(dt.second_trainer, provider=provider)
        peers.append(peer)
        other_word, other_block = peer.recv()
        peer.send((bytes(receiver.desc), receiver.imm_block, [own_word, other_word], [own_block, other_block]))
        trainer = Trainer(engine, sched, dt.LAYOUT, 0, [receiver.desc],
                          [fl.MrDesc.from_bytes(own_word), fl.MrDesc.from_bytes(other_word)],
                          inference_imms=[receiver.imm_block], trainer_imms=[own_block, other_block],
                          timeout_s=dt.TIMEOUT_S)
        return peer, trainer

    def update(peer: Peer, trainer: Trainer, version: int) -> tuple[str, str]:
        receiver.expect(version)
        peer.send(("update", version, False))
        try:
            trainer.update(version, dt.half(0))
            mine = "ok"
        except fl.FabricError as ex:
            mine = f"{type(ex).__name__}: {ex}"
        return mine, peer.recv()

    try:
        peer, trainer = join()
        assert update(peer, trainer, 1) == ("ok", "ok")
        assert receiver.wait(1, 10)

        # Version 2: trainer 1 writes its shard, skips the barrier and is killed.
        receiver.expect(2)
        peer.send(("update", 2, True))
        assert peer.recv() == "ok"
        peer.proc.kill()
        peer.proc.join(30)
        with pytest.raises(fl.FabricError):
            trainer.update(2, dt.half(0))
        assert not receiver.wait(2, 2)

        # Version 3: a new trainer 1; trainer 0 keeps its Engine.
        peer, trainer = join()
        assert update(peer, trainer, 3) == ("ok", "ok")
        assert receiver.wait(3, 10)
        full = np.random.default_rng(0).standard_normal(dt.SHAPE, dtype=np.float32)
        assert np.array_equal(receiver.tensors()["w"][0], full)
        peer.send(("done",))
        peer.close()
    finally:
        for p in peers:
            if p.proc.is_alive():
                p.proc.kill()
        engine.stop()
        inference.stop()
