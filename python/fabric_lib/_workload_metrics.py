"""fabric_weights_* and fabric_moe_* for fabric_lib.metrics.register_workload: read from each
workload's metric_counts() at every scrape (docs/observability.md)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

# metric_counts() key -> (family, type, help, extra labels), per kind of workload.
FAMILIES: dict[str, list[tuple[str, str, str, str, dict[str, str]]]] = {
    "weights_trainer": [
        ("updates_ok", "fabric_weights_updates", "counter", "Whole weight updates sent, by outcome", {"outcome": "ok"}),
        ("updates_failed", "fabric_weights_updates", "counter", "Whole weight updates sent, by outcome",
         {"outcome": "failed"}),
        ("update_seconds", "fabric_weights_update_seconds", "counter", "Seconds inside Trainer.update", {}),
        ("version", "fabric_weights_version", "gauge", "The last version this trainer rank sent whole", {}),
        ("bytes", "fabric_weights_bytes", "counter", "Bytes the trainer rank's WRITEs carried", {}),
        ("writes", "fabric_weights_writes", "counter", "WRITEs the trainer rank posted", {}),
        ("barrier_wait_seconds", "fabric_weights_barrier_wait_seconds", "counter",
         "Seconds waiting for the other trainer ranks at group barriers", {}),
    ],
    "weights_receiver": [
        ("complete_version", "fabric_weights_complete_version", "gauge",
         "The newest version that arrived whole on this inference rank", {}),
    ],
    "moe": [
        (f"{phase}_{key}", f"fabric_moe_{name}", "counter", doc, {"phase": phase})
        for phase in ("dispatch", "combine")
        for key, name, doc in (
            ("calls", "calls", "dispatch or combine calls on this rank"),
            ("tokens", "tokens", "Tokens this rank sent, by phase"),
            ("seconds", "seconds", "Seconds in the native send and receive halves, by phase"),
        )
    ],
}


def workload_kind(workload: Any) -> str:
    """The FAMILIES key of a weights Trainer or Receiver or a moe Buffer; InvalidArgumentError
    for anything else."""
    from . import InvalidArgumentError
    from .moe import Buffer
    from .weights import Receiver, Trainer

    for cls, kind in ((Trainer, "weights_trainer"), (Receiver, "weights_receiver"), (Buffer, "moe")):
        if isinstance(workload, cls):
            return kind
    raise InvalidArgumentError(
        f"register_workload: a fabric_lib.weights Trainer or Receiver or a fabric_lib.moe Buffer, "
        f"not {type(workload).__name__}")


class WorkloadCollector(Collector):
    """Every registered workload's counts at each scrape; weak references, like EngineCollector."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workloads: weakref.WeakValueDictionary[tuple[str, str], Any] = weakref.WeakValueDictionary()

    def add(self, workload: Any, name: str) -> None:
        kind = workload_kind(workload)
        with self._lock:
            self._workloads[(kind, name)] = workload

    def remove(self, name: str) -> None:
        with self._lock:
            for key in [k for k in self._workloads.keys() if k[1] == name]:
                self._workloads.pop(key, None)

    def collect(self) -> Iterator[Any]:
        with self._lock:
            workloads = list(self._workloads.items())
        families: dict[str, Any] = {}
        for (kind, name), workload in workloads:
            counts = workload.metric_counts()
            for key, family, mtype, doc, extra in FAMILIES[kind]:
                if family not in families:
                    cls = CounterMetricFamily if mtype == "counter" else GaugeMetricFamily
                    families[family] = cls(family, doc, labels=["workload", *extra])
                families[family].add_metric([name, *extra.values()], counts[key])
        yield from families.values()
