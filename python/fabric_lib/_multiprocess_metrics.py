"""prometheus_client's multi-process mode for fabric_lib.metrics (docs/observability.md).

In that mode (PROMETHEUS_MULTIPROC_DIR set before prometheus_client is first imported), the
process serving /metrics reads the per-process files that every process's prometheus_client
metrics write, through MultiProcessCollector; a collector registered in another process, such as
ours in each process that holds an engine, is never asked. So each such process copies what its
collectors would answer into its own files: on a daemon thread every interval, and at exit.

How each type is written, so that the serving side's merge gives what one process would show:
- counters and histograms as this process's totals (the merge sums them over the processes,
  those that have exited included, as it does for prometheus_client's own counters);
- histogram buckets one by one rather than cumulated: the merge cumulates them itself;
- gauges in mode ``livesum``: a process's gauges leave the scrape once it is marked dead
  (``prometheus_client.multiprocess.mark_process_dead``, the serving side's job), and a series
  whose engine or workload went away in a live process is written 0.

The values go through ``prometheus_client.values.ValueClass``, the class prometheus_client's
own metrics store their values in (its multi-process form writes this process's file).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import values
from prometheus_client.registry import Collector

_log = logging.getLogger("fabric_lib.metrics")

# Seconds between copies; a scrape sees a process's figures at most this old.
INTERVAL_ENV = "FABRIC_METRICS_MULTIPROC_INTERVAL_S"
DEFAULT_INTERVAL_S = 1.0


def enabled() -> bool:
    """Whether prometheus_client chose its multi-process mode when it was imported."""
    return bool(getattr(values.ValueClass, "_multiprocess", False))


def _interval_s() -> float:
    raw = os.environ.get(INTERVAL_ENV, "")
    try:
        interval = float(raw) if raw else DEFAULT_INTERVAL_S
    except ValueError:
        interval = -1.0
    if not interval > 0:
        from . import InvalidArgumentError

        raise InvalidArgumentError(f"{INTERVAL_ENV}={raw!r}: want a number of seconds above 0")
    return interval


_Key = tuple[str, str, str, tuple[tuple[str, str], ...]]  # type, family, sample, labels


class Mirror:
    """Copies the samples of `sources()`' collectors into this process's multi-process files."""

    def __init__(self, sources: Callable[[], Iterable[Collector]]) -> None:
        self._sources = sources
        self._lock = threading.Lock()
        self._values: dict[_Key, Any] = {}
        self._gauges: set[_Key] = set()  # the gauge series written by the last copy
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._failures_logged = 0
        self._at_exit = False

    def start(self) -> None:
        """Starts the copying thread once per process (a forked child starts its own)."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            interval = _interval_s()
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, args=(interval,),
                                            name="fabric-metrics-mirror", daemon=True)
            self._thread.start()
            if not self._at_exit:  # the last figures of a process that exits between copies
                atexit.register(self.write)
                self._at_exit = True

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.write()

    def write(self) -> None:
        """One copy of every collector's current samples."""
        with self._lock:
            gauges: set[_Key] = set()
            for collector in self._sources():
                try:
                    for family in collector.collect():
                        self._write_family(family, gauges)
                except Exception:  # noqa: BLE001 - one broken collector must not stop the others
                    if self._failures_logged < 3:  # a few lines, not one a second for good
                        self._failures_logged += 1
                        _log.exception("fabric_lib.metrics: copying %r to the multi-process files failed",
                                       collector)
            for key in self._gauges - gauges:
                self._values[key].set(0)
            self._gauges = gauges

    def _write_family(self, family: Any, gauges: set[_Key]) -> None:
        if family.type == "histogram":
            self._write_histogram(family)
            return
        for s in family.samples:
            if s.name.endswith("_created"):
                continue  # per-process creation times would not merge into anything meaningful
            key = self._set(family, s.name, s.labels, s.value)
            if family.type == "gauge":
                gauges.add(key)

    def _write_histogram(self, family: Any) -> None:
        buckets: dict[tuple[tuple[str, str], ...], list[tuple[float, str, float]]] = {}
        for s in family.samples:
            if s.name.endswith("_bucket"):
                labels = {k: v for k, v in s.labels.items() if k != "le"}
                le = s.labels["le"]
                buckets.setdefault(tuple(sorted(labels.items())), []).append((float(le), le, s.value))
            elif s.name.endswith("_sum"):
                self._set(family, s.name, s.labels, s.value)
            # _count: the merge makes it from the buckets
        for labels, rows in buckets.items():
            below = 0.0
            for _, le, cumulative in sorted(rows):
                self._set(family, f"{family.name}_bucket", {**dict(labels), "le": le}, cumulative - below)
                below = cumulative

    def _set(self, family: Any, sample: str, labels: dict[str, str], value: float) -> _Key:
        key: _Key = (family.type, family.name, sample, tuple(sorted(labels.items())))
        held = self._values.get(key)
        if held is None:
            names = tuple(k for k, _ in key[3])
            label_values = tuple(v for _, v in key[3])
            held = self._values[key] = values.ValueClass(
                family.type, family.name, sample, names, label_values, family.documentation,
                multiprocess_mode="livesum")
        held.set(value)
        return key
