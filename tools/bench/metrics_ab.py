#!/usr/bin/python3
"""Summary of many fabric-bench --metrics-ab runs beside their --metrics-aa controls.

Usage: metrics_ab.py OUT.json [OUT.png] -- AB.json... -- AA.json...
Writes, per size, each run's on / off ratio (best round and all rounds), their medians and the
geometric mean's 95 % interval, for the A/B runs and the A/A controls; with OUT.png a box plot
of the best-round ratios with the 0.98 target. One run's ratio says little on a shared box
(docs/observability.md, "What counting costs"): this is how the figure is read from many.
"""
import json
import math
import statistics
import sys


def ratios(paths):
    by_size = {}
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        for row in doc["results"]:
            if "metrics_on_over_off" not in row:
                continue
            entry = by_size.setdefault(row["size"], {"peak": [], "avg": []})
            entry["peak"].append(row["metrics_on_over_off"])
            entry["avg"].append(row["metrics_on_over_off_avg"])
    return by_size


def summary(values):
    logs = [math.log(v) for v in values if v > 0]
    mean = statistics.mean(logs)
    half = 1.96 * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else 0.0
    return {"runs": len(values), "median": statistics.median(values),
            "geomean": math.exp(mean), "geomean_95": [math.exp(mean - half), math.exp(mean + half)],
            "min": min(values), "max": max(values), "values": values}


def main():
    args = sys.argv[1:]
    if args.count("--") != 2 or args.index("--") not in (1, 2):
        print(__doc__, file=sys.stderr)
        return 1
    first = args.index("--")
    second = args.index("--", first + 1)
    outs, ab, aa = args[:first], args[first + 1:second], args[second + 1:]
    if not ab or not aa:
        print("metrics_ab.py: give A/B and A/A runs", file=sys.stderr)
        return 1
    doc = {}
    for name, paths in (("ab", ab), ("aa", aa)):
        doc[name] = {str(size): {kind: summary(v) for kind, v in entry.items()}
                     for size, entry in sorted(ratios(paths).items())}
    with open(outs[0], "w") as f:
        json.dump(doc, f, indent=1)
    for size in doc["ab"]:
        ab_peak, aa_peak = doc["ab"][size]["peak"], doc["aa"].get(size, {}).get("peak")
        control = f", A/A {aa_peak['median']:.3f}" if aa_peak else ""
        print(f"{size:>6} B: A/B best-round median {ab_peak['median']:.3f} "
              f"(95 % {ab_peak['geomean_95'][0]:.3f}-{ab_peak['geomean_95'][1]:.3f}), "
              f"all rounds {doc['ab'][size]['avg']['median']:.3f}{control}")
    if len(outs) == 2:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("metrics_ab.py: no matplotlib for /usr/bin/python3; no plot", file=sys.stderr)
            return 2
        sizes = list(doc["ab"])
        fig, ax = plt.subplots(figsize=(7, 4))
        data, labels = [], []
        for size in sizes:
            for name in ("ab", "aa"):
                if size in doc[name]:
                    data.append(doc[name][size]["peak"]["values"])
                    labels.append(f"{size} B\n{'on/off' if name == 'ab' else 'on/on'}")
        ax.boxplot(data, labels=labels, showfliers=False)
        ax.axhline(0.98, color="C3", linestyle=":", label="target 0.98")
        ax.axhline(1.0, color="grey", linewidth=0.5)
        ax.set_ylabel("best-round Gbit/s ratio per run")
        ax.set_title("fabric-bench --metrics-ab (on/off) and --metrics-aa (on/on)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(outs[1], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
