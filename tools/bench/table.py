#!/usr/bin/python3
"""Markdown tables from a fabric-bench JSON, as pasted into docs/benchmarks.md.

Usage: table.py RESULTS.json
"""
import json
import sys


def size(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


def num(v, fmt):
    return "–" if v is None else fmt % v


def main():
    doc = json.load(open(sys.argv[1]))
    m = doc["machine"]
    print("provider `%s`%s, libfabric %s, %s CPUs (%s), window %s, best of %s rounds, "
          "load average at the end %s" % (
              m["provider"], " (delivery-complete)" if m.get("delivery_complete") else "",
              m["libfabric"], m["cpus"], m["cpu_model"], m["window"], m["reps"],
              " / ".join("%.2f" % x for x in m["loadavg_at_end"])))
    print()
    # Peak: the best measured round; avg: all measured rounds' bytes / their time.
    # Every latency is a round trip (writes: submit to local completion; imm: ping
    # to pong). "–": too few samples or no raw loop.
    print("| op | size | count | iters | engine peak Gbit/s | engine avg Gbit/s "
          "| raw peak Gbit/s | raw avg Gbit/s | ratio | engine req/s "
          "| rt p50 µs | rt p99 µs | rt p99.9 µs | raw rt p50 µs | raw rt p99 µs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in doc["results"]:
        print("| %s | %s | %d | %d | %s | %s | %s | %s | %s | %.0f | %s | %s | %s | %s | %s |" % (
            r["op"], size(r["size"]) if r["size"] else "0", r["count"], r["iterations"],
            num(r["engine_gbps"], "%.2f"), num(r.get("engine_avg_gbps"), "%.2f"),
            num(r["raw_gbps"], "%.2f"), num(r.get("raw_avg_gbps"), "%.2f"),
            num(r["ratio"], "%.3f"),
            r["ops_per_s"], num(r["p50_us"], "%.1f"), num(r["p99_us"], "%.1f"),
            num(r["p999_us"], "%.1f"),
            num(r.get("raw_p50_us") if r["raw_gbps"] is not None else None, "%.1f"),
            num(r.get("raw_p99_us") if r["raw_gbps"] is not None else None, "%.1f")))
    bidir = [r for r in doc["results"] if r["op"] == "single_write_bidir"]
    if bidir:
        print()
        print("| size | initiator → target Gbit/s | target → initiator Gbit/s | sum (peak) | "
              "sum (avg) |")
        print("|---:|---:|---:|---:|---:|")
        for r in bidir:
            print("| %s | %.2f | %.2f | %.2f | %.2f |" % (
                size(r["size"]), r["out_gbps"], r["in_gbps"], r["engine_gbps"],
                r["engine_avg_gbps"]))
    sc = [r for r in doc["results"] if r["op"] == "scatter"]
    if sc:
        print()
        print("| peers | engine submit_scatter p50 / p99 ns | raw post of P writes p50 / p99 ns |")
        print("|---:|---:|---:|")
        for r in sc:
            print("| %d | %.0f / %.0f | %.0f / %.0f |" % (
                r["peers"], r["engine_post_p50_ns"], r["engine_post_p99_ns"],
                r["raw_post_p50_ns"], r["raw_post_p99_ns"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
