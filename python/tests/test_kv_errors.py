"""fabric_lib.kv errors: every call that runs without the GIL (connect, request, wait, prepare,
layer_done, cancel) raises fabric_lib's FabricError subclasses once the GIL is back, never a
crash; and the pieces the vLLM connector relies on (a source page offset, concurrent connects to
one sender) work end to end over tcp on loopback."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import fabric_lib as fl
import fabric_lib.kv as fkv

LAYERS, PAGES, HEADS, HEAD_SIZE = 2, 8, 2, 16


def layout() -> fkv.Layout:
    # vLLM's CPU layout with one page of one head as the "token", as the connector uses it.
    return fkv.vllm_cpu(LAYERS, PAGES, 1, HEADS, 0, HEADS, HEAD_SIZE, 4)


def caches(fill: float | None = None) -> list[np.ndarray]:
    out = []
    for layer in range(LAYERS):
        a = np.zeros((PAGES, HEADS, 1, 2 * HEAD_SIZE), dtype=np.float32)
        if fill is not None:
            # Each page holds its own index (and the layer), so a misplaced page shows.
            a += (fill + layer * 100 + np.arange(PAGES, dtype=np.float32)).reshape(PAGES, 1, 1, 1)
        out.append(a)
    return out


@pytest.fixture
def pair():
    src = caches(fill=1000.0)
    dst = caches()
    sender = fkv.Sender(layout(), src, request_timeout_ms=1000, heartbeat_ms=200)
    receiver = fkv.Receiver(layout(), dst, request_timeout_ms=1000, heartbeat_ms=200,
                            quarantine_ms=500)
    try:
        yield sender, receiver, src, dst
    finally:
        receiver.close()
        sender.close()


def test_error_classes_are_fabric_errors(pair):
    sender, receiver, _, _ = pair
    with pytest.raises(fl.NotFoundError):  # poll holds the GIL; the same classes as the rest
        receiver.poll("nobody")
    with pytest.raises(fl.NotFoundError):
        sender.layer_done("nobody", 0)
    sender.prepare("dup", [0, 1], 2)
    with pytest.raises(fl.InvalidArgumentError) as e:
        sender.prepare("dup", [0, 1], 2)
    assert isinstance(e.value, ValueError) and "exists" in str(e.value)
    with pytest.raises(fl.OutOfRangeError):
        sender.layer_done("dup", LAYERS)
    with pytest.raises(fl.NotFoundError):
        receiver.request("x", [0], 1, [5])  # no source 5
    with pytest.raises(fl.MalformedError):
        receiver.connect(b"not an address", 1.0)
    sender.cancel("dup")


def test_connect_to_a_dead_address_raises(pair):
    _, receiver, _, _ = pair
    gone = fkv.Sender(layout(), caches(), request_timeout_ms=500)
    address = gone.address
    gone.close()
    with pytest.raises(fl.FabricError) as e:
        receiver.connect(address, 1.0)
    assert isinstance(e.value, (fl.FabricTimeoutError, fl.ProviderError, fl.ShutdownError)), e.value
    # The same address again: a clear error at once, still no crash.
    with pytest.raises(fl.FabricError):
        receiver.connect(address, 1.0)


def test_wait_timeout_and_duplicate_request_raise(pair):
    sender, receiver, _, _ = pair
    source = receiver.connect(sender.address, 10.0)
    receiver.request("never", [0, 1], 2, [source])  # the sender never prepares it
    with pytest.raises(fl.FabricTimeoutError) as e:
        receiver.wait("never", 0.2)
    assert isinstance(e.value, TimeoutError)
    with pytest.raises(fl.InvalidArgumentError, match="exists"):
        receiver.request("never", [2, 3], 2, [source])
    receiver.cancel("never")
    state, _ = receiver.wait("never", 10.0)
    assert state == "cancelled"
    receiver.release("never")


def test_closed_endpoints_raise_shutdown():
    receiver = fkv.Receiver(layout(), caches())
    receiver.close()
    with pytest.raises(fl.ShutdownError):
        receiver.request("x", [0], 1, [0])
    sender = fkv.Sender(layout(), caches())
    sender.close()
    with pytest.raises(fl.ShutdownError):
        sender.prepare("x", [0], 1)


def test_concurrent_connects_to_one_sender_share_it(pair):
    sender, receiver, _, _ = pair
    results: list[object] = []

    def connect() -> None:
        try:
            results.append(receiver.connect(sender.address, 10.0))
        except Exception as e:  # noqa: BLE001 - reported below
            results.append(e)

    threads = [threading.Thread(target=connect) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 4 and all(r == results[0] for r in results), results
    assert isinstance(results[0], int)


def test_src_first_loads_only_the_pages_past_a_held_prefix(pair):
    sender, receiver, src, dst = pair
    source = receiver.connect(sender.address, 10.0)
    # The prefill's request spans source pages 3..7; the decoder holds the first two already
    # and asks for the last three, into its pages 6, 0, 4.
    sender.prepare("p", [3, 4, 5, 6, 7], 5)
    receiver.request("p", [6, 0, 4], 3, [source], src_first=2)
    for layer in range(LAYERS):
        sender.layer_done("p", layer)
    state, error = receiver.wait("p", 30.0)
    assert state == "done", error
    for layer in range(LAYERS):
        for dst_page, src_page in ((6, 5), (0, 6), (4, 7)):
            np.testing.assert_array_equal(dst[layer][dst_page], src[layer][src_page])
        for untouched in (1, 2, 3, 5, 7):
            assert not dst[layer][untouched].any(), (layer, untouched)
    receiver.release("p")
    for _ in range(200):
        if sender.poll("p")[0] in fkv.TERMINAL:
            break
        threading.Event().wait(0.05)
    assert sender.poll("p")[0] == "done"
    sender.release("p")


def test_src_first_past_the_prefill_is_rejected(pair):
    sender, receiver, _, _ = pair
    source = receiver.connect(sender.address, 10.0)
    sender.prepare("short", [0, 1], 2)
    receiver.request("short", [0, 1], 2, [source], src_first=1)  # wants tokens 1..2 of 2
    state, error = receiver.wait("short", 30.0)
    assert state == "failed" and "from token 1" in (error or ""), (state, error)
    receiver.release("short")
    sender.cancel("short")


def test_pages_added_chunk_by_chunk(pair):
    # vLLM allocates a prompt's blocks chunk by chunk: the sender is prepared with the first
    # chunk's pages, sends each chunk's layers as they are computed, and gets the rest later.
    sender, receiver, src, dst = pair
    source = receiver.connect(sender.address, 10.0)
    sender.prepare("c", [7, 2], 5)
    receiver.request("c", [0, 1, 3, 4], 4, [source], src_first=1)  # holds source page 0 already
    with pytest.raises(fl.InvalidArgumentError, match="add_pages"):
        sender.layer_done("c", 0, (0, 3))  # the third page is not given yet
    for layer in range(LAYERS):
        sender.layer_done("c", layer, (0, 2))
    assert receiver.poll("c")[0] != "done"
    with pytest.raises(fl.InvalidArgumentError):
        sender.add_pages("c", [1, 5, 6, 0])  # one more than the 5 tokens need
    sender.add_pages("c", [5, 6, 1])
    for layer in range(LAYERS):
        sender.layer_done("c", layer, (2, 5))
    state, error = receiver.wait("c", 30.0)
    assert state == "done", error
    for layer in range(LAYERS):
        for dst_page, src_page in ((0, 2), (1, 5), (3, 6), (4, 1)):
            np.testing.assert_array_equal(dst[layer][dst_page], src[layer][src_page])
        assert not dst[layer][2].any()
    receiver.release("c")


def wait_state(endpoint, wire_id: str, timeout_s: float = 10.0) -> str:
    deadline = threading.Event()
    for _ in range(int(timeout_s / 0.02)):
        state, _ = endpoint.poll(wire_id)
        if state in fkv.TERMINAL:
            return state
        deadline.wait(0.02)
    return endpoint.poll(wire_id)[0]


def test_declined_request_ends_done_at_once(pair):
    # A decoder whose prefix cache holds the whole prompt will not ask: the prefiller stops
    # holding the request for it (instead of failing it after receiver_timeout).
    sender, receiver, _, _ = pair
    source = receiver.connect(sender.address, 10.0)
    sender.prepare("held", [0, 1], 2)
    receiver.decline("held", [source])
    assert wait_state(sender, "held") == "done"
    sender.release("held")
    receiver.decline("early", [source])  # before the prefiller prepared it
    sender.prepare("early", [2, 3], 2)
    assert wait_state(sender, "early") == "done"
    sender.release("early")
    with pytest.raises(fl.NotFoundError):
        receiver.decline("x", [9])


def test_decline_after_asking_does_not_end_the_transfer(pair):
    sender, receiver, src, dst = pair
    source = receiver.connect(sender.address, 10.0)
    sender.prepare("both", [4, 5], 2)
    receiver.request("both", [6, 7], 2, [source])
    receiver.decline("both", [source])  # this decoder asked: its transfer still runs
    for layer in range(LAYERS):
        sender.layer_done("both", layer)
    state, error = receiver.wait("both", 30.0)
    assert state == "done", error
    np.testing.assert_array_equal(dst[0][6], src[0][4])
    assert wait_state(sender, "both") == "done"
