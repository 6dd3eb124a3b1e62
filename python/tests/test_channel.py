"""Engine.channel: messages reach only their channel with the sender's address, which answers
them; a message for a channel not open is counted and dropped; bad input names the channel."""

from __future__ import annotations

import queue
import time

import pytest

import fabric_lib as fl

STEP_S = 20.0


def _wait_for(predicate, timeout: float = STEP_S) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def test_messages_reach_only_their_channel_and_the_sender_is_answered(provider: str) -> None:
    with fl.Engine(provider) as server, fl.Engine(provider) as client:
        kv: queue.Queue[tuple[bytes, fl.NetAddr]] = queue.Queue()
        weights: queue.Queue[tuple[bytes, fl.NetAddr]] = queue.Queue()
        answers: queue.Queue[tuple[bytes, fl.NetAddr]] = queue.Queue()
        with server.channel("kv", lambda m, s: kv.put((bytes(m), s))) as server_kv, \
                server.channel("weights", lambda m, s: weights.put((bytes(m), s))), \
                client.channel("kv", lambda m, s: answers.put((bytes(m), s))) as client_kv, \
                client.channel("weights", lambda m, s: None) as client_weights:
            for i in range(20):
                client_kv.send(server.main_address, b"kv%d" % i).wait(STEP_S)
                client_weights.send(server.main_address, b"w%d" % i).wait(STEP_S)
            got_kv = [kv.get(timeout=STEP_S) for _ in range(20)]
            got_w = [weights.get(timeout=STEP_S) for _ in range(20)]
            assert sorted(m for m, _ in got_kv) == sorted(b"kv%d" % i for i in range(20))
            assert sorted(m for m, _ in got_w) == sorted(b"w%d" % i for i in range(20))
            assert all(s == client.main_address for _, s in got_kv + got_w)
            # The address the message carried is enough to answer it.
            server_kv.send(got_kv[0][1], b"ack").wait(STEP_S)
            assert answers.get(timeout=STEP_S) == (b"ack", server.main_address)
            assert kv.empty() and weights.empty()
            assert server.metrics()["messages_unrouted"] == 0


def test_a_message_for_a_channel_not_open_is_counted_and_dropped() -> None:
    with fl.Engine("tcp") as server, fl.Engine("tcp") as client:
        got: queue.Queue[bytes] = queue.Queue()
        with server.channel("kv", lambda m, s: got.put(bytes(m))), \
                client.channel("ghost", lambda m, s: None) as ghost, \
                client.channel("kv", lambda m, s: None) as kv:
            ghost.send(server.main_address, b"lost").wait(STEP_S)
            kv.send(server.main_address, b"found").wait(STEP_S)
            assert got.get(timeout=STEP_S) == b"found"
            assert _wait_for(lambda: server.metrics()["messages_unrouted"] >= 1)
            assert server.metrics()["messages_unrouted"] == 1
            assert got.empty()


def test_bad_input_names_the_channel() -> None:
    with fl.Engine("tcp") as engine:
        with engine.channel("kv", lambda m, s: None, max_message_size=100) as kv:
            assert kv.name == "kv" and kv.is_open and kv.max_message_size == 100
            with pytest.raises(fl.InvalidArgumentError, match="'kv' is already open"):
                engine.channel("kv", lambda m, s: None)
            with pytest.raises(fl.InvalidArgumentError, match="channel 'kv'.*101 bytes"):
                kv.send(engine.main_address, bytes(101))
        assert not kv.is_open
        with pytest.raises(fl.InvalidArgumentError, match="'kv' is closed"):
            kv.send(engine.main_address, b"x")
        # The name is free again, and raw receive pools are refused beside channels.
        with engine.channel("kv", lambda m, s: None):
            with pytest.raises(fl.InvalidArgumentError, match="receives on channels"):
                engine.submit_recvs(engine.max_message_size, 4, lambda m: None)
        with pytest.raises(TypeError):
            engine.channel("nocb", None)
