#!/usr/bin/env python3
"""Plots fabric-kv-bench JSON: per-request last-layer-to-ready, layerwise vs bulk, against the
per-layer compute and link times.

Usage: plot.py RESULTS.json OUT.png   (exit 2 with a message when matplotlib is missing)
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__)
        return 1
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot.py: matplotlib is missing (Debian: python3-matplotlib); the JSON is the result")
        return 2
    with open(sys.argv[1]) as f:
        r = json.load(f)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for mode, color in (("layerwise", "tab:blue"), ("bulk", "tab:orange")):
        xs = [x["last_layer_to_ready_ms"] for x in r["runs"] if x["mode"] == mode]
        a.plot(range(len(xs)), xs, "o-", color=color, label=mode)
    a.axhline(r["target_last_layer_to_ready_ms"], color="gray", ls="--",
              label="target: one layer's link time + 1 ms")
    a.set_xlabel("request")
    a.set_ylabel("last layer computed -> decoder ready (ms)")
    a.set_yscale("log")
    a.legend()
    a.set_title(f"{r['provider']}: {r['layers']} layers, {r['bytes_per_request'] / 2**20:.0f} MiB")
    b.bar(["compute / layer", "link / layer"], [r["compute_ms_per_layer"], r["link_ms_per_layer"]],
          color=["tab:green", "tab:red"])
    b.set_ylabel("ms")
    b.set_title(f"hidden: {100 * r['fraction_hidden']:.1f} %, {r['gbit_per_s']:.2f} Gbit/s")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
