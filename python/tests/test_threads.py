"""The engine places its own threads (docs/concepts.md, "Threads and CPUs"): an engine created on
a thread pinned to one CPU still runs every thread of it on the process's CPUs, thread_cpus= and
FABRIC_CPUS choose others, and bad sets raise InvalidArgumentError."""

from __future__ import annotations

import os
import threading

import pytest

import fabric_lib


def _process_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _cpulist(cpus: list[int]) -> str:
    return ",".join(str(c) for c in cpus) if len(cpus) < 2 or cpus != list(
        range(cpus[0], cpus[-1] + 1)
    ) else f"{cpus[0]}-{cpus[-1]}"


def _kernel_cpus(tid: int) -> str:
    with open(f"/proc/self/task/{tid}/status") as f:
        for line in f:
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    return ""


def _engine_threads(engine: fabric_lib.Engine) -> list[tuple[str, int, str]]:
    del engine  # the list is process-wide; the engine only has to be alive
    return [t for t in fabric_lib.library_threads() if t[0] in ("fabric-wk0", "fabric-cb")]


@pytest.fixture
def two_cpus() -> list[int]:
    cpus = _process_cpus()
    if len(cpus) < 2:
        pytest.skip(f"needs 2 CPUs, this process may use {len(cpus)}")
    return cpus


def test_engine_made_on_a_pinned_thread_runs_on_every_cpu(two_cpus: list[int]) -> None:
    made: dict[str, object] = {}

    def pinned_creator() -> None:
        os.sched_setaffinity(0, {two_cpus[0]})
        try:
            made["engine"] = fabric_lib.Engine("tcp")
        except BaseException as e:  # reported by the main thread
            made["error"] = e

    t = threading.Thread(target=pinned_creator)
    t.start()
    t.join(60)
    assert not t.is_alive()
    assert "error" not in made, made.get("error")
    engine = made["engine"]
    assert isinstance(engine, fabric_lib.Engine)
    with engine:
        want = _cpulist(two_cpus)
        assert engine.thread_cpus == want
        threads = _engine_threads(engine)
        assert {name for name, _, _ in threads} == {"fabric-wk0", "fabric-cb"}
        for name, tid, cpus in threads:
            assert cpus == want, name
            assert _kernel_cpus(tid) == want, name


def test_thread_cpus_keyword_places_the_threads(two_cpus: list[int]) -> None:
    last = str(two_cpus[-1])
    with fabric_lib.Engine("tcp", thread_cpus=last) as engine:
        assert engine.thread_cpus == last
        for name, tid, cpus in _engine_threads(engine):
            assert cpus == last, name
            assert _kernel_cpus(tid) == last, name


def test_fabric_cpus_environment_places_the_threads(
    two_cpus: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = str(two_cpus[0])
    monkeypatch.setenv("FABRIC_CPUS", first)
    with fabric_lib.Engine("tcp") as engine:
        assert engine.thread_cpus == first


@pytest.mark.parametrize("bad", ["1-0", "x", "65535"])
def test_bad_thread_cpus_raise_invalid_argument(bad: str) -> None:
    with pytest.raises(fabric_lib.InvalidArgumentError):
        fabric_lib.Engine("tcp", thread_cpus=bad)


def test_malformed_fabric_cpus_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRIC_CPUS", "0-")
    with pytest.raises(fabric_lib.InvalidArgumentError, match="FABRIC_CPUS"):
        fabric_lib.Engine("tcp")


def _fabric_threads_since(before: set[int]) -> dict[int, tuple[str, str]]:
    """tid -> (name, Cpus_allowed_list) of this process's fabric-* threads not in `before`
    (read from /proc: fabric_lib._kv embeds its own copy of the library, whose threads
    fabric_lib.library_threads() does not list)."""
    out = {}
    for tid in map(int, os.listdir("/proc/self/task")):
        if tid in before:
            continue
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except FileNotFoundError:
            continue
        if name.startswith("fabric-"):
            out[tid] = (name, _kernel_cpus(tid))
    return out


def test_kv_sender_and_receiver_take_thread_cpus(two_cpus: list[int]) -> None:
    import numpy as np

    import fabric_lib.kv as fkv

    last = str(two_cpus[-1])
    layout = fkv.vllm_cpu(1, 4, 1, 1, 0, 1, 8, 4)
    before = set(map(int, os.listdir("/proc/self/task")))
    sender = fkv.Sender(layout, [np.zeros((4, 1, 1, 16), np.float32)], thread_cpus=last)
    receiver = fkv.Receiver(layout, [np.zeros((4, 1, 1, 16), np.float32)], thread_cpus=last)
    try:
        threads = _fabric_threads_since(before)
        names = sorted(name for name, _ in threads.values())
        # Each engine's worker and callback threads, and the sender's heartbeat tick.
        assert names.count("fabric-wk0") == 2 and "fabric-kv-tick" in names, names
        assert {cpus for _, cpus in threads.values()} == {last}, threads
    finally:
        sender.close()
        receiver.close()
    with pytest.raises(fabric_lib.InvalidArgumentError):
        fkv.Sender(layout, [np.zeros((4, 1, 1, 16), np.float32)], thread_cpus="1-0")
