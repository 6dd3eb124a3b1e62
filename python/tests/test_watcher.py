"""Engine.alloc_uvm_watcher: host-written words, callbacks with the GIL, release."""

from __future__ import annotations

import logging
import queue
import threading
import time

import pytest

import fabric_lib as fl

STEP_S = 30.0


def test_callback_sees_changes_up_to_the_final_value() -> None:
    with fl.Engine("shm") as e:
        seen: queue.Queue[tuple[int, int]] = queue.Queue()
        w = e.alloc_uvm_watcher(lambda old, new: seen.put((old, new)))
        assert w.active and w.word != 0 and w.device_word is None and w.load() == 0
        for v in range(1, 101):
            w.store(v)
        last = 0
        while (
            last != 100
        ):  # values in between may be skipped; each step starts where the last ended
            old, new = seen.get(timeout=STEP_S)
            assert old == last and new > old
            last = new
        w.release()
        assert not w.active
        with pytest.raises(fl.InvalidArgumentError):
            w.store(101)


def test_returning_false_stops_watching_and_errors_are_logged(caplog) -> None:
    with fl.Engine("shm") as e:
        calls: queue.Queue[int] = queue.Queue()

        def once(old: int, new: int) -> bool:
            calls.put(new)
            return False

        w = e.alloc_uvm_watcher(once)
        w.store(5)
        assert calls.get(timeout=STEP_S) == 5
        # The watcher thread frees the slot right after the callback returns.
        deadline = time.monotonic() + STEP_S
        while w.active:
            assert time.monotonic() < deadline, "the watcher stayed active"

        raised = threading.Event()

        def broken(old: int, new: int) -> None:
            raised.set()
            raise RuntimeError("watcher boom")

        with caplog.at_level(logging.ERROR, logger="fabric_lib"):
            with e.alloc_uvm_watcher(broken) as w2:
                w2.store(1)
                assert raised.wait(STEP_S)
                seen_again: queue.Queue[int] = queue.Queue()
                w3 = e.alloc_uvm_watcher(lambda o, n: seen_again.put(n))
                w3.store(7)  # the watcher thread carries on
                assert seen_again.get(timeout=STEP_S) == 7
                w3.release()
            assert not w2.active
        assert e.callback_errors >= 1 and "watcher boom" in caplog.text


def test_bad_memory_kind_and_callback() -> None:
    with fl.Engine("shm") as e:
        with pytest.raises(fl.InvalidArgumentError):
            e.alloc_uvm_watcher(lambda o, n: True, "gpu")
        with pytest.raises(TypeError):
            e.alloc_uvm_watcher(None)  # type: ignore[arg-type]
    with pytest.raises(fl.ShutdownError):
        e.alloc_uvm_watcher(lambda o, n: True)
