"""Workloads take an engine: fabric_lib.kv's Sender and Receiver, fabric_lib.moe's Buffer and the
weights Receiver run on the fabric_lib.Engine they are given, keep it alive, give back what they
registered (and the weights Receiver its reserved immediates) when they close, the engine running
on for the process's other workloads; and engine= together with the options of an engine of
their own is refused."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import fabric_lib as fl
import fabric_lib.kv as fkv
from fabric_lib.moe import Buffer
from fabric_lib.weights import InferenceLayout, MeshGroup, NameRule, Receiver, SourceParam, TargetParam, TrainerLayout
from fabric_lib.weights import plan, plan_input_json

LAYERS, PAGES, HEADS, HEAD_SIZE = 2, 4, 2, 8


def layout() -> fkv.Layout:
    return fkv.vllm_cpu(LAYERS, PAGES, 1, HEADS, 0, HEADS, HEAD_SIZE, 4)


def caches() -> list[np.ndarray]:
    return [np.zeros((PAGES, HEADS, 1, 2 * HEAD_SIZE), np.float32) for _ in range(LAYERS)]


def moe_buffer(**kwargs) -> Buffer:
    # A group of one: its all_gather is the identity.
    return Buffer(0, 1, 2, 16, 4, 1, all_gather=lambda blob: [blob], **kwargs)


def registrations(engine: fl.Engine) -> int:
    return engine.metrics()["registrations"]


@pytest.mark.parametrize("make", ["sender", "receiver", "moe", "weights"])
def test_a_workload_runs_on_the_given_engine_and_gives_its_registrations_back(provider: str, make: str) -> None:
    with fl.Engine(provider) as engine:
        before = registrations(engine)
        if make == "sender":
            w = fkv.Sender(layout(), caches(), engine=engine)
            assert w.address == bytes(engine.main_address)  # no engine of its own
        elif make == "receiver":
            peer = fkv.Sender(layout(), caches(), provider=provider)  # on an engine of its own
            w = fkv.Receiver(layout(), caches(), engine=engine)
            assert w.address == bytes(engine.main_address)
            w.connect(peer.address, 30.0)  # registers the regions for this source
        elif make == "moe":
            w = moe_buffer(engine=engine)
        else:
            shape = [64, 32]
            trainer = TrainerLayout([("dp", 1)], [MeshGroup("all")], [SourceParam("w", shape, "float32", ["R"], "all")])
            inference = InferenceLayout([("tp", 1)], [TargetParam("w", shape, "float32", ["R"])])
            w = Receiver(engine, plan(plan_input_json(trainer, inference, [NameRule("w", ["w"])])), 0)
            first, count = w.imm_block
            assert count > 0 and first >= 2**20  # a reserved block, not the fixed values
        assert registrations(engine) > before
        w.close()
        assert registrations(engine) == before
        assert not engine.stopped  # the engine is the caller's: it runs on
        if make == "receiver":
            peer.close()
        if make == "weights":
            assert w.imms.count == 0  # the block went back to the engine


def test_a_kv_sender_keeps_its_engine_alive() -> None:
    engine = fl.Engine("shm")
    address = bytes(engine.main_address)
    sender = fkv.Sender(layout(), caches(), engine=engine)
    del engine
    gc.collect()
    assert sender.address == address
    sender.prepare("r", [0, 1], 2)  # the engine still serves it
    assert sender.poll("r")[0] not in fkv.TERMINAL
    sender.close()


@pytest.mark.parametrize("option", [{"provider": "tcp"}, {"bind_address": "127.0.0.1"},
                                    {"request_timeout_ms": 1000}, {"thread_cpus": ""}])
def test_kv_refuses_engine_with_options_of_its_own_engine(option: dict) -> None:
    with fl.Engine("shm") as engine:
        name = next(iter(option))
        with pytest.raises(fl.InvalidArgumentError, match=f"engine= was given, so {name} cannot be"):
            fkv.Sender(layout(), caches(), engine=engine, **option)
        with pytest.raises(fl.InvalidArgumentError, match=f"engine= was given, so {name} cannot be"):
            fkv.Receiver(layout(), caches(), engine=engine, **option)
        assert registrations(engine) == 0  # refused before anything was registered


@pytest.mark.parametrize("option", [{"provider": "shm"}, {"busy_poll": False}, {"idle_sleep_us": 10}])
def test_moe_refuses_engine_with_options_of_its_own_engine(option: dict) -> None:
    with fl.Engine("shm") as engine:
        with pytest.raises(fl.InvalidArgumentError, match=f"engine= was given, so {next(iter(option))} cannot be"):
            moe_buffer(engine=engine, **option)


def test_anything_but_a_running_engine_is_refused() -> None:
    with pytest.raises(fl.InvalidArgumentError, match="takes a fabric_lib.Engine, not str"):
        fkv.Sender(layout(), caches(), engine="tcp")  # type: ignore[arg-type]
    with pytest.raises(fl.InvalidArgumentError, match="takes a fabric_lib.Engine, not str"):
        moe_buffer(engine="shm")
    engine = fl.Engine("shm")
    engine.stop()
    with pytest.raises(fl.ShutdownError):
        fkv.Receiver(layout(), caches(), engine=engine)
    with pytest.raises(fl.ShutdownError):
        moe_buffer(engine=engine)


def test_without_an_engine_each_makes_its_own() -> None:
    with fl.Engine("shm") as engine:
        sender = fkv.Sender(layout(), caches(), provider="shm")
        buf = moe_buffer(provider="shm")
        try:
            assert sender.address != bytes(engine.main_address)
        finally:
            buf.close()
            sender.close()
