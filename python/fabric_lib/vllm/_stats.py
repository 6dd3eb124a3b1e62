"""FabricConnector's transfer statistics in vLLM's own logging and /metrics, named as
NixlConnector's are (vllm:nixl_* there, vllm:fabric_* here) so dashboards carry over.

The worker counts per step (get_kv_connector_stats); vLLM aggregates the steps, logs a summary
(reduce) and feeds Prometheus (FabricPromMetrics.observe).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (
    KVConnectorPromMetrics,
    KVConnectorStats,
)
from vllm.v1.metrics.utils import create_metric_per_engine

# Counters: how many since the last report. Lists: one value per completed load.
_COUNTERS = ("transfers", "failed_transfers", "expired_reqs", "sends", "failed_sends")
_SERIES = ("transfer_duration", "bytes_transferred")


@dataclass
class FabricConnectorStats(KVConnectorStats):
    def __post_init__(self) -> None:
        if not self.data:
            self.reset()

    def reset(self) -> None:
        self.data = {**dict.fromkeys(_COUNTERS, 0), **{k: [] for k in _SERIES}}

    def record_load(self, seconds: float, nbytes: int) -> None:
        self.data["transfers"] += 1
        self.data["transfer_duration"].append(seconds)
        self.data["bytes_transferred"].append(nbytes)

    def count(self, key: str) -> None:
        self.data[key] += 1

    def aggregate(self, other: KVConnectorStats) -> FabricConnectorStats:
        for k in _COUNTERS:
            self.data[k] += other.data.get(k, 0)
        for k in _SERIES:
            self.data[k].extend(other.data.get(k, ()))
        return self

    def reduce(self) -> dict[str, int | float]:
        out: dict[str, int | float] = {k: self.data[k] for k in _COUNTERS}
        durations = self.data["transfer_duration"]
        if durations:
            out["p50_transfer_ms"] = round(statistics.median(durations) * 1e3, 3)
            out["max_transfer_ms"] = round(max(durations) * 1e3, 3)
        out["MiB_transferred"] = round(sum(self.data["bytes_transferred"]) / 2**20, 3)
        return out

    def is_empty(self) -> bool:
        return not any(self.data[k] for k in _COUNTERS) and not self.data["transfer_duration"]


class FabricPromMetrics(KVConnectorPromMetrics):
    def __init__(self, vllm_config: Any, metric_types: dict, labelnames: list[str],
                 per_engine_labelvalues: dict[int, list[object]]) -> None:
        super().__init__(vllm_config, metric_types, labelnames, per_engine_labelvalues)
        self._histograms = {
            "transfer_duration": self._histogram(
                "vllm:fabric_xfer_time_seconds",
                "Histogram of FabricConnector KV load durations, asked to landed.",
                [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 5.0, 30.0]),
            "bytes_transferred": self._histogram(
                "vllm:fabric_bytes_transferred",
                "Histogram of bytes per FabricConnector KV load.",
                [2**k for k in range(12, 34, 2)]),
        }
        docs = {
            "transfers": "KV loads that landed whole.",
            "failed_transfers": "KV loads that failed (dead or restarted producer, rejected, "
                                "duplicate id, cancelled).",
            "expired_reqs": "KV loads not done within load_timeout_s, and producer requests no "
                            "consumer asked for within receiver_timeout_ms.",
            "sends": "Producer requests whose KV was offered to a consumer.",
            "failed_sends": "Producer requests whose send failed.",
        }
        self._counters = {
            k: create_metric_per_engine(
                self._counter_cls(name=f"vllm:fabric_num_{k}", documentation=doc,
                                  labelnames=labelnames),
                self.per_engine_labelvalues)
            for k, doc in docs.items()
        }

    def _histogram(self, name: str, doc: str, buckets: list[float]) -> dict:
        return create_metric_per_engine(
            self._histogram_cls(name=name, documentation=doc, buckets=buckets,
                                labelnames=self._labelnames),
            self.per_engine_labelvalues)

    def observe(self, transfer_stats_data: dict[str, Any], engine_idx: int = 0) -> None:
        for key, metric in self._histograms.items():
            for value in transfer_stats_data.get(key, ()):
                metric[engine_idx].observe(value)
        for key, metric in self._counters.items():
            n = transfer_stats_data.get(key, 0)
            if n:
                metric[engine_idx].inc(n)
