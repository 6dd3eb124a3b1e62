"""Callbacks, the GIL, blocking waits and lifetimes."""

from __future__ import annotations

import gc
import logging
import pickle
import queue
import subprocess
import sys
import textwrap
import threading
import weakref

import numpy as np
import pytest

import fabric_lib as fl
from engine_pair import PAIR_BYTES as N
from engine_pair import STEP_S, shm_pair



@pytest.fixture()
def pair():
    with shm_pair() as p:
        yield p


def run_script(body: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Runs `body` in a fresh interpreter (the one running the tests) and returns its result."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(body)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_callback_runs_on_the_callback_thread_before_wait_returns(pair) -> None:
    a, _, hs, dd, dst = pair
    seen: list[tuple[object, bool, bool]] = []

    def done(error: fl.FabricError | None) -> None:
        seen.append(
            (
                error,
                threading.get_ident() != main,
                bool((dst == np.arange(N, dtype=np.uint8)).all()),
            )
        )

    main = threading.get_ident()
    t = a.single_write(hs, dd, N, callback=done)
    t.wait(STEP_S)
    assert t.done() and t.exception() is None
    assert seen == [(None, True, True)]


def test_callback_exception_is_logged_and_the_engine_carries_on(pair, caplog) -> None:
    a, _, hs, dd, _ = pair

    def broken(error: fl.FabricError | None) -> None:
        raise RuntimeError("boom from a callback")

    with caplog.at_level(logging.ERROR, logger="fabric_lib"):
        a.single_write(hs, dd, 128, imm=3, callback=broken).wait(STEP_S)
    assert a.callback_errors == 1
    [record] = [r for r in caplog.records if r.name == "fabric_lib"]
    assert "single_write(length=128" in record.getMessage() and "imm=3" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError
    assert "boom from a callback" in caplog.text and "Traceback" in caplog.text
    a.single_write(hs, dd, N).wait(STEP_S)  # still working


def test_uncaught_callback_error_reaches_stderr_without_logging_setup() -> None:
    result = run_script("""
        import numpy as np, fabric_lib as fl
        with fl.Engine() as a:
            h, d = a.reg_mr(np.zeros(64, np.uint8))
            def broken(err):
                raise KeyError("from the callback")
            a.single_write(h, d, 64, callback=broken).wait(30)
            print("callback_errors", a.callback_errors)
        """)
    assert result.returncode == 0, result.stderr
    assert "callback_errors 1" in result.stdout
    assert "KeyError: 'from the callback'" in result.stderr and "Traceback" in result.stderr


def test_recv_memoryview_is_only_valid_during_the_callback(pair, caplog) -> None:
    a, b, *_ = pair
    kept: queue.Queue[memoryview] = queue.Queue()
    copies: queue.Queue[bytes] = queue.Queue()

    def on_recv(msg: memoryview) -> None:
        assert msg.readonly
        copies.put(bytes(msg))
        kept.put(msg)
        if bytes(msg) == b"raise":
            raise ValueError("bad message")

    b.submit_recvs(b.max_message_size, 2, on_recv)
    with caplog.at_level(logging.ERROR, logger="fabric_lib"):
        for m in (b"first", b"raise", b"third"):
            a.send(b.main_address, m).wait(STEP_S)
            assert copies.get(timeout=STEP_S) == m
    view = kept.get(timeout=STEP_S)
    with pytest.raises(ValueError, match="released"):
        bytes(view)
    assert b.callback_errors == 1 and "bad message" in caplog.text


def test_recv_callback_that_keeps_an_export_is_reported(pair, caplog) -> None:
    a, b, *_ = pair
    arrays: queue.Queue[pickle.PickleBuffer] = queue.Queue()
    # PickleBuffer holds a buffer export of the message until released.
    b.submit_recvs(b.max_message_size, 2, lambda m: arrays.put(pickle.PickleBuffer(m)))
    with caplog.at_level(logging.ERROR, logger="fabric_lib"):
        a.send(b.main_address, b"kept").wait(STEP_S)
        arrays.get(timeout=STEP_S)
        a.send(b.main_address, b"next").wait(STEP_S)
        arrays.get(timeout=STEP_S)  # the pool still delivers
    assert b.callback_errors == 2
    assert "kept a buffer export of its message" in caplog.text


def test_calls_that_would_deadlock_in_a_callback_refuse(pair) -> None:
    a, _, hs, dd, _ = pair
    outcome: queue.Queue[BaseException | None] = queue.Queue()
    pending = a.single_write(hs, dd, 16, callback=lambda e: None)
    pending.wait(STEP_S)

    def try_stop(error: fl.FabricError | None) -> None:
        try:
            a.stop()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            outcome.put(e)
        else:
            outcome.put(None)

    a.single_write(hs, dd, 16, callback=try_stop).wait(STEP_S)
    assert isinstance(outcome.get(timeout=STEP_S), fl.InvalidArgumentError)
    assert not a.stopped

    inner: list[fl.Transfer] = []

    def try_wait(error: fl.FabricError | None) -> None:
        inner.append(a.single_write(hs, dd, 16, callback=lambda e: None))
        try:
            inner[0].wait(STEP_S)
        except BaseException as e:  # noqa: BLE001
            outcome.put(e)
        else:
            outcome.put(None)

    a.single_write(hs, dd, 16, callback=try_wait).wait(STEP_S)
    assert isinstance(outcome.get(timeout=STEP_S), fl.InvalidArgumentError)
    inner[0].wait(STEP_S)  # outside the callback thread it is fine


def test_waits_release_the_gil() -> None:
    with fl.Engine("shm") as e:
        counter = e.imm_counter(5)
        ticks = 0
        stop = threading.Event()

        def spin() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1

        t = threading.Thread(target=spin)
        t.start()
        try:
            with pytest.raises(fl.FabricTimeoutError):
                counter.wait(1, timeout=0.5)
            during = ticks
        finally:
            stop.set()
            t.join(STEP_S)
        # Held GIL: the spinner would get only the odd switch interval's worth.
        assert during > 10_000


def test_many_threads_submit_at_once(pair) -> None:
    a, b, hs, dd, _ = pair
    counter = b.imm_counter(11)
    errors: list[BaseException] = []

    def submitter(k: int) -> None:
        try:
            transfers = [
                a.single_write(hs, dd, 256, src_offset=k * 256, dst_offset=k * 256, imm=11)
                for _ in range(100)
            ]
            fl.wait_all(transfers, timeout=STEP_S)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=submitter, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(STEP_S)
    assert not errors
    counter.wait_and_consume(400, timeout=STEP_S)


def test_ctrl_c_interrupts_a_blocking_wait() -> None:
    result = run_script("""
        import os, signal, threading, time, fabric_lib as fl
        with fl.Engine() as e:
            counter = e.imm_counter(1)
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
            start = time.monotonic()
            try:
                counter.wait(1)  # no timeout: only Ctrl-C ends it
            except KeyboardInterrupt:
                print("interrupted after", round(time.monotonic() - start, 1))
        """)
    assert result.returncode == 0, result.stderr
    assert "interrupted after" in result.stdout


def test_failed_request_reports_its_error() -> None:
    # tcp: on shm, writing to a stopped engine of the same process crashes inside libfabric
    # (docs/python.md, known limits); across processes shm fails cleanly too.
    with fl.Engine("tcp") as b, fl.Engine("tcp", request_timeout_ms=500) as c:
        _, dd = b.reg_mr(np.zeros(64, np.uint8))
        hc, _ = c.reg_mr(np.zeros(64, np.uint8))
        c.single_write(hc, dd, 64).wait(STEP_S)
        b.stop()  # the target is gone
        errors: queue.Queue[fl.FabricError | None] = queue.Queue()
        t = c.single_write(hc, dd, 64, callback=errors.put)
        with pytest.raises(fl.FabricError):
            t.wait(STEP_S)
        assert isinstance(errors.get(timeout=STEP_S), (fl.ProviderError, fl.FabricTimeoutError))
        assert isinstance(t.exception(), fl.FabricError)
        c.single_write(hc, c.reg_mr(np.zeros(64, np.uint8))[1], 64).wait(
            STEP_S
        )  # others unaffected


def test_registered_objects_live_until_dereg(pair) -> None:
    a, b, _, dd, _ = pair
    arr = np.full(N, 7, np.uint8)
    alive = weakref.ref(arr)
    handle, _ = a.reg_mr(arr)
    del arr
    gc.collect()
    assert handle.obj is alive()  # the handle holds it
    a.single_write(handle, dd, N).wait(STEP_S)
    del handle
    gc.collect()
    assert alive() is not None  # the engine still has it registered
    # Engines let go of registered memory on dereg_mr() and stop().
    arr2 = np.zeros(16, np.uint8)
    alive2 = weakref.ref(arr2)
    h2, _ = a.reg_mr(arr2)
    del arr2
    a.dereg_mr(h2)
    del h2
    gc.collect()
    assert alive2() is None
    a.stop()
    gc.collect()
    assert alive() is None


def test_raw_pointer_registration_with_owner(pair) -> None:
    a, b, _, dd, dst = pair
    buf = np.full(N, 9, np.uint8)
    handle, desc = a.reg_mr(buf.ctypes.data, buf.nbytes, "cpu", owner=buf)
    assert handle.obj is buf and handle.ptr == buf.ctypes.data and handle.device == "cpu"
    assert desc.size == N
    a.single_write(handle, dd, N).wait(STEP_S)
    assert (dst == 9).all()


def test_bytearray_and_context_manager() -> None:
    with fl.Engine("shm") as b, fl.Engine("shm") as a:
        src = bytearray(b"x" * 100)
        dst = bytearray(100)
        hs, _ = a.reg_mr(src)
        _, dd = b.reg_mr(dst)
        with pytest.raises(BufferError):
            dst.append(1)  # registration pins it: no resize under the engine
        a.single_write(hs, dd, 100).wait(STEP_S)
        assert dst == src
    assert a.stopped and b.stopped


def test_engines_are_stopped_at_exit_and_in_their_own_callback() -> None:
    # The last reference to `e` goes away inside its own callback; another engine is simply
    # left running. Both must end cleanly with the interpreter.
    result = run_script("""
        import threading, numpy as np, fabric_lib as fl
        done = threading.Event()
        def start():
            e = fl.Engine()
            h, d = e.reg_mr(np.zeros(64, np.uint8))
            e.submit_recvs(e.max_message_size, 2, lambda m: None)
            e.single_write(h, d, 64, callback=lambda err: (e, done.set()))
        start()
        assert done.wait(30)
        left_running = fl.Engine()
        left_running.submit_recvs(left_running.max_message_size, 2, lambda m: None)
        print("exiting")
        """)
    assert result.returncode == 0, result.stderr
    assert "exiting" in result.stdout
