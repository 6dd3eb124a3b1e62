#!/usr/bin/python3
"""Bandwidth vs size from a fabric-bench JSON: engine vs raw, one panel per op.

Usage: plot.py RESULTS.json OUT.png
Exit 2 (with a message) when matplotlib is missing: the JSON stays the result.
"""
import json
import sys


def pyplot(who):
    """matplotlib.pyplot on the Agg backend, or None after saying on stderr why `who` skips its
    plot (tools/weights/ray_transport_plot.py uses it too)."""
    try:
        import matplotlib
        matplotlib.use("Agg")  # no display on CI or over ssh
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"{who}: matplotlib is not installed for /usr/bin/python3 "
              "(Debian: apt-get install python3-matplotlib); skipping the plot",
              file=sys.stderr)
        return None
    return plt


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 1
    plt = pyplot("fabric-bench plot")
    if plt is None:
        return 2

    with open(sys.argv[1]) as f:
        doc = json.load(f)
    rows = [r for r in doc["results"] if (r.get("engine_gbps") or 0) > 0]
    ops = sorted({r["op"] for r in rows}, key=lambda o: (o != "single_write", o))
    if not ops:
        print("fabric-bench plot: no bandwidth rows to plot", file=sys.stderr)
        return 2
    machine = doc.get("machine", {})
    fig, axes = plt.subplots(1, len(ops), figsize=(6 * len(ops), 4.5), squeeze=False)
    for ax, op in zip(axes[0], ops):
        # Scatter rows share one slice size; what varies is the peer count.
        x_of = (lambda r: r.get("peers", r["count"])) if op == "scatter" else (lambda r: r["size"])
        pts = sorted((r for r in rows if r["op"] == op), key=x_of)
        xs = [x_of(r) for r in pts]
        ax.plot(xs, [r["engine_gbps"] for r in pts], "o-", label="engine, peak")
        if all(r.get("engine_avg_gbps") is not None for r in pts):
            ax.plot(xs, [r["engine_avg_gbps"] for r in pts], ":", color="C0", label="engine, avg")
        if op == "single_write_bidir":
            ax.plot(xs, [r["out_gbps"] for r in pts], "^-", label="initiator → target")
            ax.plot(xs, [r["in_gbps"] for r in pts], "v-", label="target → initiator")
        if all(r.get("raw_gbps") is not None for r in pts):
            ax.plot(xs, [r["raw_gbps"] for r in pts], "s--", color="C1", label="raw libfabric, peak")
            if all(r.get("raw_avg_gbps") is not None for r in pts):
                ax.plot(xs, [r["raw_avg_gbps"] for r in pts], ":", color="C1",
                        label="raw libfabric, avg")
        ax.set_xscale("log", base=2)
        ax.set_xlabel({"paged_write": "page size (bytes)", "sendrecv": "message size (bytes)",
                       "sendrecv_addressed": "message size (bytes)",
                       "scatter": "peers (%s B slice each)" % pts[0]["size"]}
                      .get(op, "write size (bytes)"))
        ax.set_ylabel("Gbit/s (1e9 bit/s); peak: best round, avg: all rounds")
        ax.set_title("%s, %s" % (op, machine.get("provider", pts[0]["provider"])))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("fabric-bench: %s CPUs, libfabric %s" % (machine.get("cpus", "?"),
                                                          machine.get("libfabric", "?")))
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    print("fabric-bench plot: wrote %s" % sys.argv[2], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
