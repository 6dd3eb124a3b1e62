#!/usr/bin/env python3
"""Plots serve_bench.py's JSON: TTFT and inter-token latency (p50 solid, p99 dashed) and output
tokens/s against concurrency, one line per setup.

Usage: plot.py RESULTS.json OUT.png   (exit 2 with a message when matplotlib is missing)
"""

from __future__ import annotations

import json
import sys

COLORS = {"plain": "tab:gray", "fabric-tcp": "tab:blue", "fabric-shm": "tab:green", "nixl": "tab:red"}


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
    fig, (ttft, itl, tput) = plt.subplots(1, 3, figsize=(15, 4.2))
    for name, setup in r["setups"].items():
        levels = sorted(setup["levels"], key=int)
        xs = [int(c) for c in levels]
        color = COLORS.get(name)
        for ax, metric in ((ttft, "ttft"), (itl, "itl")):
            ax.plot(xs, [setup["levels"][c][f"median_{metric}_ms"] for c in levels], "o-",
                    color=color, label=f"{name} p50")
            ax.plot(xs, [setup["levels"][c][f"p99_{metric}_ms"] for c in levels], "s--",
                    color=color, alpha=0.6, label=f"{name} p99")
        tput.plot(xs, [setup["levels"][c]["output_throughput"] for c in levels], "o-", color=color,
                  label=name)
    for ax, title, unit in ((ttft, "time to first token", "ms"), (itl, "inter-token latency", "ms"),
                            (tput, "output tokens/s", "tokens/s")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(r["concurrency"], [str(c) for c in r["concurrency"]])
        ax.set_xlabel("concurrent requests")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(alpha=0.3)
    ttft.set_yscale("log")  # c=16 queues on the one prefill core: seconds, beside c=1's 0.2 s
    ttft.legend(fontsize=7)
    tput.legend(fontsize=7)
    m = r["model"]
    fig.suptitle(f"vLLM OpenAI servers, {m['layers']}-layer random Llama (hidden {m['hidden']}, "
                 f"{m['kv_bytes_per_token'] // 1024} KiB KV/token), prompts {r['input_len']}"
                 f" ± {r['range_ratio']:.0%}, {r['output_len']} output tokens", fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
