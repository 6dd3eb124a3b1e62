"""Engine.watch_peer: the engine's peer liveness from Python (docs/api.md, "Peer liveness"); the
stopped-and-resumed process case is tests/conformance/peer_watch_test.cpp."""

from __future__ import annotations

import threading
import time

import pytest

import fabric_lib as fl


def test_a_watched_peer_answers_then_turns_silent_when_its_engine_stops() -> None:
    with fl.Engine("tcp") as a, fl.Engine("tcp") as b:
        b_answers = b.channel("work", lambda m, s: None)  # an engine on channels answers pings
        seen: list[tuple[fl.NetAddr, str]] = []
        silent = threading.Event()

        def on_change(peer: fl.NetAddr, state: str) -> None:
            seen.append((peer, state))
            if state == "silent":
                silent.set()

        with a.watch_peer(b.main_address, on_change, interval=0.05, silent_after=5.0) as w:
            assert w.silent_after == pytest.approx(5.0)
            began = w.last_heard  # the watch's start, until an answer comes
            assert began <= time.monotonic()  # the engine's clock is time.monotonic()'s
            deadline = time.monotonic() + 20
            while w.last_heard == began and time.monotonic() < deadline:  # bounded: an answer
                time.sleep(0.01)
            assert w.last_heard > began, "no answer to a ping"
            assert w.state == "alive" and seen == []
            b_answers.close()
            b.stop()
            assert silent.wait(20), "a stopped engine was never reported silent"
            assert seen == [(b.main_address, "silent")]
            assert w.state == "silent"
        assert not w.is_open


def test_bad_watches_are_refused_naming_the_problem() -> None:
    with fl.Engine("tcp") as a, fl.Engine("tcp") as raw:
        with pytest.raises(fl.InvalidArgumentError, match="itself"):
            a.watch_peer(a.main_address)
        with pytest.raises(fl.InvalidArgumentError, match="interval"):
            a.watch_peer(raw.main_address, interval=0)
        with pytest.raises(fl.InvalidArgumentError, match="silent_after"):
            a.watch_peer(raw.main_address, silent_after=-1)
        with pytest.raises(TypeError):
            a.watch_peer(raw.main_address, 42)  # type: ignore[arg-type]
        with pytest.raises(fl.InvalidArgumentError, match="'fabric.'"):
            a.channel("fabric.liveness", lambda m, s: None)
        raw.submit_recvs(raw.max_message_size, 2, lambda m: None)
        with pytest.raises(fl.InvalidArgumentError, match="submit_recvs"):
            raw.watch_peer(a.main_address)
