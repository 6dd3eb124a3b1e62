"""docs/grafana/fabric-lib.json queries only series that exist: every fabric_* name it uses is in
a scrape of a live engine's collector, every vllm:fabric_* name is one FabricConnector's stats
define (python/fabric_lib/vllm/_stats.py), and each label it groups by is one of that series."""

from __future__ import annotations

import json
import pathlib
import re

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import fabric_lib as fl
import fabric_lib.metrics as fm

ROOT = pathlib.Path(__file__).resolve().parents[2]
DASHBOARD = json.loads((ROOT / "docs/grafana/fabric-lib.json").read_text())
STATS = (ROOT / "python/fabric_lib/vllm/_stats.py").read_text()
# Labels Prometheus adds at scrape time, and the ones a histogram's series carry.
SCRAPE_LABELS = {"instance", "job", "le"}


def _queries() -> list[str]:
    out = []
    for panel in DASHBOARD["panels"]:
        out += [t["expr"] for t in panel.get("targets", [])]
    return out


def _names(expr: str) -> set[str]:
    return set(re.findall(r"(?<![\w:])((?:vllm:)?fabric_\w+)", expr))


def _scraped() -> dict[str, set[str]]:
    """Sample name -> its label names, from a registry holding one engine that did one write."""
    registry = CollectorRegistry()
    with fl.Engine("shm") as engine:
        import numpy as np

        buf = np.zeros(4096, np.uint8)
        handle, desc = engine.reg_mr(buf)
        engine.single_write(handle, desc, 64, imm=3).wait(60)
        fm.register(engine, "e", registry=registry)
        text = generate_latest(registry).decode()
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


def test_the_dashboard_is_well_formed() -> None:
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    assert _queries()
    for panel in DASHBOARD["panels"]:
        if panel["type"] != "row":
            assert panel["targets"] and panel["title"]


def test_every_engine_series_it_queries_exists() -> None:
    scraped = _scraped()
    for expr in _queries():
        for name in (n for n in _names(expr) if not n.startswith("vllm:")):
            assert name in scraped, f"{name} (in {expr!r}) is not in a scrape: {sorted(scraped)}"
            grouped = set()
            for labels in re.findall(r"by \(([^)]*)\)", expr):
                grouped |= {label.strip() for label in labels.split(",")}
            missing = grouped - scraped[name] - SCRAPE_LABELS
            assert not missing, f"{expr!r} groups by {missing}, which {name} does not have"


@pytest.mark.parametrize("suffix", ["_total", "_bucket"])
def test_every_vllm_series_it_queries_is_defined_by_the_connector(suffix: str) -> None:
    for expr in _queries():
        for name in (n for n in _names(expr) if n.startswith("vllm:") and n.endswith(suffix)):
            base = name[: -len(suffix)]
            if base.startswith("vllm:fabric_num_"):  # created as f"vllm:fabric_num_{k}"
                assert f'"{base.removeprefix("vllm:fabric_num_")}"' in STATS, name
            else:
                assert f'"{base}"' in STATS, name
