#!/usr/bin/python3
"""Plots a ray_transport_bench.py JSON: GB/s by size for the consumer's get and for the whole
move, FABRIC against Ray's object store, with the consumer's local copy as the bound.

Usage: ray_transport_plot.py RESULTS.json OUT.png
Exit 2 (with a message) when matplotlib is missing: the JSON stays the result.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from plot import pyplot  # noqa: E402 - fabric-bench's plot script, beside this one's tools


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 1
    plt = pyplot("ray_transport_plot")
    if plt is None:
        return 2
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    rows = sorted(doc["results"], key=lambda r: r["bytes"])
    mib = [r["bytes"] / (1 << 20) for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, key, title in ((axes[0], "get_s", "consumer's ray.get"), (axes[1], "total_s", "put + get (driver clock)")):
        for path, style in (("fabric", "o-"), ("object_store", "s-")):
            ax.plot(mib, [r["bytes"] / r[path][f"{key}_median"] / 1e9 for r in rows], style, label=f"{path}, median")
        ax.plot(mib, [r["local_copy_gbps_best"] for r in rows], "k:", label="local copy (bound)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tensor size (MiB)")
        ax.set_ylabel("GB/s")
        ax.set_title(f"{title}, provider {doc['provider']}")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
