"""Disaggregated serving as deployed: two prefill and two decode vLLM OpenAI servers
(`python -m vllm.entrypoints.openai.api_server`, FabricConnector) behind the shipped proxy
(`python -m fabric_lib.vllm.proxy`), on vLLM's defaults: multiprocessing on, CPU binding
'auto', prefix caching and chunked prefill on. Nothing but the model's size is set
(VLLM_CPU_KVCACHE_SPACE, --max-model-len, --block-size, --enforce-eager, --dtype); no
VLLM_ENABLE_V1_MULTIPROCESSING or VLLM_CPU_OMP_THREADS_BIND. The model and its tokenizer are
random and made here (no downloads).

Cases, on the same servers:
  round-1    32 concurrent requests through the proxy: completions and chat, some streamed,
             most sharing a 3-block prefix; every output equal, token for token, to a plain run
             of the same request on a producer (no kv_transfer_params: the connector stays out),
             and every one moved its KV (the consumers' vllm:fabric_num_transfers), with both
             prefill and both decode servers used.
  threads    the connector engine's threads inside each decode server's vLLM worker (whose main
             thread vLLM pins to one CPU) run on the process's CPUs, and where the
             kv_connector_extra_config key thread_cpus says on the server that sets it.
  bad        through the proxy: a prompt over max_model_len fails on the prefill leg, a body the
             decode server refuses fails on the decode leg, each with its status and reason,
             and the proxy drains the refused request's KV (one more load lands) so that its
             producer does not hold it for receiver_timeout_ms; malformed kv_transfer_params
             sent to a decode server run there, locally.
  round-2    32 more: new suffixes of the cached prefix and round one's prompts again (prefix
             hits on both sides); all right, no load failed.
  logs       no server logged a peer "silent" or "dead", and every server still answers.

`--shape PxD` sets how many prefill and decode servers run (default 2x2; the threads case checks
the thread_cpus server only where there is a second decode server).

Run by tests/support/in-vllm-venv.sh (ctest kv.vllm_serving).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import aiohttp

from connector_test import die_with_parent, make_model
from reaper import Reaper

BLOCK = 32
MAX_MODEL_LEN = 1024
MAX_TOKENS = 8
START_S = 900  # four servers start together on two cores
REQUEST_S = 300  # the longest one request may take
VOCAB = 512
FIRST_WORD = 3  # words 0-2 are the tokenizer's unk/pad/eos
BAD_LOG = re.compile(r"silent|\bdead\b|EngineDeadError|EngineCore encountered a fatal error",
                     re.IGNORECASE)


# ---------------------------------------------------------------------------- model and servers


def make_tokenizer(path: str) -> None:
    """One word per token id, "w000" to "w511" (all the same width, so no word is a prefix of a
    special one), and a chat template that joins the messages' contents: the chat endpoint sees
    exactly the tokens a completion would."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab={word(i): i for i in range(VOCAB)},
                                     unk_token=word(0)))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=word(0), pad_token=word(1),
                                   eos_token=word(2))
    fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    fast.save_pretrained(path)


def word(i: int) -> str:
    return f"w{i:03d}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpulist(cpus: list[int]) -> str:
    cpus = sorted(cpus)
    if len(cpus) > 1 and cpus == list(range(cpus[0], cpus[-1] + 1)):
        return f"{cpus[0]}-{cpus[-1]}"
    return ",".join(map(str, cpus))


def server_env() -> dict[str, str]:
    env = dict(os.environ)
    # vLLM's defaults: the test must not inherit a caller's overrides of them either.
    for key in ("VLLM_ENABLE_V1_MULTIPROCESSING", "VLLM_CPU_OMP_THREADS_BIND", "OMP_NUM_THREADS",
                "FABRIC_CPUS"):
        env.pop(key, None)
    if os.environ.get("FABRIC_TEST_DEBUG"):  # the connector's debug lines (asks, loads)
        env["VLLM_LOGGING_LEVEL"] = "DEBUG"
    env.update({"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "FI_TCP_IFACE": "lo",
                "FI_SOCKETS_IFACE": "lo", "TOKENIZERS_PARALLELISM": "false"})
    return env


class Process:
    """A child in its own process group (a vLLM server forks an engine core and a worker), killed
    with all of that group at close, and with the test process however it dies."""

    def __init__(self, name: str, argv: list[str], workdir: str, port: int) -> None:
        self.name, self.port = name, port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.proc = subprocess.Popen(argv, env=server_env(), stdin=subprocess.DEVNULL,
                                     stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=die_with_parent)
        REAPER.watch(self.proc.pid)  # its own session: the group id is its pid

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    def close(self) -> None:
        for sig, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 30)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                continue
            if sig == signal.SIGTERM:  # its children too, if any outlived it
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            break

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()


REAPER = Reaper()  # created at import, before any server; closed at the end of main()


def vllm_server(name: str, role: str, workdir: str, extra: dict | None = None) -> Process:
    port = free_port()
    transfer = {"kv_connector": "FabricConnector",
                "kv_connector_module_path": "fabric_lib.vllm.connector", "kv_role": role,
                "kv_connector_extra_config": {"provider": "tcp", **(extra or {})}}
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--host", "127.0.0.1", "--port", str(port), "--model", os.path.join(workdir, "model"),
            "--served-model-name", "tiny", "--dtype", "float32", "--block-size", str(BLOCK),
            "--max-model-len", str(MAX_MODEL_LEN), "--enforce-eager", "--seed", "0",
            "--kv-transfer-config", json.dumps(transfer)]
    return Process(name, argv, workdir, port)


def wait_healthy(procs: list[Process], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    waiting = list(procs)
    while waiting:
        for p in list(waiting):
            if p.proc.poll() is not None:
                raise RuntimeError(f"{p.name} exited (rc {p.proc.returncode}) while starting")
            if p.healthy():
                waiting.remove(p)
        if waiting and time.monotonic() > deadline:
            raise TimeoutError(f"not up within {timeout_s:.0f} s: {[p.name for p in waiting]}")
        if waiting:
            time.sleep(1)  # the poll interval of a bounded wait


# ---------------------------------------------------------------------------- /proc and /metrics


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def threads_of(pid: int) -> list[tuple[str, str]]:
    """(name, Cpus_allowed_list) of every thread of pid."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                cpus = next(l.split(":", 1)[1].strip() for l in f
                            if l.startswith("Cpus_allowed_list:"))
        except (OSError, StopIteration):
            continue
        out.append((name, cpus))
    return out


def connector_threads(server: Process) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(fabric-* threads, VLLM::Worker-named threads) of the server's process that holds the
    connector's engine (vLLM's worker)."""
    for pid in descendants(server.proc.pid):
        try:
            threads = threads_of(pid)
        except OSError:
            continue
        fabric = [t for t in threads if t[0].startswith("fabric-")]
        if fabric:
            return fabric, [t for t in threads if t[0].startswith("VLLM::Worker")]
    return [], []


async def fabric_metrics(session: aiohttp.ClientSession, server: Process) -> dict[str, float]:
    """vllm:fabric_* counters (summed over labels) and histogram counts from /metrics."""
    async with session.get(server.url + "/metrics") as r:
        text = await r.text()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"^(vllm:fabric_\w+?)(_total|_count)?(\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if m and not m.group(1).endswith(("_created", "_bucket", "_sum")):
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(4))
    return out


# ---------------------------------------------------------------------------- requests


class Spec:
    """One client request: a completion (token ids as the prompt) or a chat (the same tokens
    as words), streamed or not."""

    def __init__(self, kind: str, tokens: list[int], stream: bool) -> None:
        self.kind, self.tokens, self.stream = kind, tokens, stream

    @property
    def path(self) -> str:
        return "/v1/completions" if self.kind == "completion" else "/v1/chat/completions"

    def body(self, stream: bool | None = None) -> dict:
        body = {"model": "tiny", "max_tokens": MAX_TOKENS, "temperature": 0.0,
                "ignore_eos": True, "return_token_ids": True,
                "stream": self.stream if stream is None else stream}
        if self.kind == "completion":
            body["prompt"] = self.tokens
        else:
            body["messages"] = [{"role": "user", "content": " ".join(map(word, self.tokens))}]
        return body


async def post(session: aiohttp.ClientSession, url: str, body: dict) -> tuple[int, object]:
    """(status, output token ids) or (status, the error body / event)."""
    async with session.post(url, json=body) as r:
        if not body.get("stream"):
            data = await r.json(content_type=None)
            if r.status != 200:
                return r.status, data
            return r.status, list(data["choices"][0]["token_ids"])
        if r.status != 200:
            return r.status, await r.json(content_type=None)
        text = await r.text()
    got: list[int] = []
    done = False
    for event in text.split("\n\n"):
        event = event.strip()
        if not event.startswith("data: "):
            continue
        payload = event[len("data: "):]
        if payload == "[DONE]":
            done = True
            continue
        data = json.loads(payload)
        if "error" in data:
            return 599, data  # an error event after the 200
        for choice in data.get("choices") or []:
            got += choice.get("token_ids") or []
    return (200, got) if done else (598, f"stream ended without [DONE]: {text[-300:]}")


class Run:
    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.procs: list[Process] = []
        self.failures: list[str] = []
        self.cpus = sorted(os.sched_getaffinity(0))
        self.pinned = str(self.cpus[-1])  # the decode server with thread_cpus set

    def need(self, cond: bool, what: str) -> None:
        if not cond:
            self.failures.append(what)

    def start(self, prefills: int, decodes: int) -> None:
        self.prefill = [vllm_server(f"prefill{i}", "kv_producer", self.workdir)
                        for i in range(prefills)]
        # The connector's defaults too, but thread_cpus on the second decode server (the
        # threads case).
        self.decode = [vllm_server(f"decode{i}", "kv_consumer", self.workdir,
                                   {"thread_cpus": self.pinned} if i == 1 else None)
                       for i in range(decodes)]
        self.procs += self.prefill + self.decode
        wait_healthy(self.prefill + self.decode, START_S)
        port = free_port()
        self.proxy = Process("proxy", [sys.executable, "-m", "fabric_lib.vllm.proxy",
                                       "--prefill", *[p.url for p in self.prefill],
                                       "--decode", *[d.url for d in self.decode],
                                       "--port", str(port), "--log-level", "debug"],
                             self.workdir, port)
        self.procs.append(self.proxy)
        wait_healthy([self.proxy], 60)

    async def batch(self, session, specs: list[Spec], url: str) -> list[tuple[int, object]]:
        return await asyncio.gather(*(post(session, url + s.path, s.body()) for s in specs))

    async def plain(self, session, specs: list[Spec]) -> list[tuple[int, object]]:
        """The same requests on the producers, not streamed, with no kv_transfer_params."""
        return await asyncio.gather(*(
            post(session, self.prefill[i % len(self.prefill)].url + s.path, s.body(stream=False))
            for i, s in enumerate(specs)))

    async def counters(self, session) -> dict[str, dict[str, float]]:
        servers = self.prefill + self.decode
        got = await asyncio.gather(*(fabric_metrics(session, s) for s in servers))
        return {s.name: m for s, m in zip(servers, got)}

    async def loads(self, session) -> float:
        """KV loads landed on the decode servers, all together."""
        got = await asyncio.gather(*(fabric_metrics(session, d) for d in self.decode))
        return sum(m.get("vllm:fabric_num_transfers", 0.0) for m in got)

    async def round(self, session, case: str, specs: list[Spec]) -> dict[str, dict[str, float]]:
        before = await self.counters(session)
        started = time.monotonic()
        outs = await self.batch(session, specs, self.proxy.url)
        seconds = time.monotonic() - started
        want = await self.plain(session, specs)
        after = await self.counters(session)
        for i, (spec, out, plain) in enumerate(zip(specs, outs, want)):
            what = f"{case}[{i}] {spec.kind}{' stream' if spec.stream else ''} " \
                   f"({len(spec.tokens)} tokens)"
            if plain[0] != 200 or len(plain[1]) != MAX_TOKENS:
                self.failures.append(f"{what}: plain run {plain}")
            elif out != plain:
                self.failures.append(f"{what}: {out} != plain {plain[1]}")
        right = sum(1 for o, p in zip(outs, want) if o == p)
        delta = {name: {k: v - before[name].get(k, 0.0) for k, v in m.items()}
                 for name, m in after.items()}
        print(f"{case}: {len(specs)} requests in {seconds:.1f} s, {right} equal to the plain run; "
              f"connector counts {json.dumps(delta)}", flush=True)
        return delta

    def check_threads(self) -> None:
        for server, want in zip(self.decode, (cpulist(self.cpus), self.pinned)):
            fabric, worker = connector_threads(server)
            print(f"threads/{server.name}: fabric {fabric}; vLLM worker {worker}", flush=True)
            self.need(bool(fabric), f"threads/{server.name}: no fabric-* thread found")
            self.need(all(cpus == want for _, cpus in fabric),
                      f"threads/{server.name}: fabric threads {fabric}, want all on {want}")

    async def bad(self, session) -> None:
        rng = random.Random(5)
        url = self.proxy.url
        # Over max_model_len: the prefill server refuses it; the proxy says so, and which leg.
        status, error = await post(session, url + "/v1/completions",
                                   Spec("completion", toks(rng, MAX_MODEL_LEN + 80), False).body())
        print(f"bad/too-long: {status} {error}", flush=True)
        self.need(status == 400 and error_leg(error) == "prefill"
                  and str(MAX_MODEL_LEN) in error_message(error),
                  f"bad/too-long: {status} {error}")
        # stream_options without stream: the proxy drops them from the prefill leg, and the
        # decode server refuses the client's body.
        body = Spec("chat", toks(rng, 50), False).body()
        body["stream_options"] = {"include_usage": True}
        before = await self.loads(session)
        status, error = await post(session, url + "/v1/chat/completions", body)
        print(f"bad/decode-refuses: {status} {error}", flush=True)
        self.need(status == 400 and error_leg(error) == "decode"
                  and "stream" in error_message(error).lower(),
                  f"bad/decode-refuses: {status} {error}")
        # The proxy drains the producer's KV through the decode server that refused the body:
        # one more load lands, and the producer stops holding (and stepping for) it now, not
        # after receiver_timeout_ms.
        deadline = time.monotonic() + REQUEST_S
        while (loads := await self.loads(session)) < before + 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.5)  # polling a counter, bounded by the deadline
        print(f"bad/drained: decode loads {before} -> {loads}", flush=True)
        self.need(loads == before + 1, f"bad/drained: decode loads {before} -> {loads}, want +1")
        # Malformed kv_transfer_params straight to a decode server: it runs there, locally.
        spec = Spec("completion", toks(rng, 70), False)
        body = spec.body()
        body["kv_transfer_params"] = {"fabric_id": ["not", "an", "id"]}
        got = await post(session, self.decode[0].url + spec.path, body)
        want = (await self.plain(session, [spec]))[0]
        self.need(got == want and got[0] == 200, f"bad/malformed-params: {got} != plain {want}")

    async def cases(self) -> None:
        rng = random.Random(11)
        prefix = toks(rng, 3 * BLOCK)
        timeout = aiohttp.ClientTimeout(total=REQUEST_S, sock_connect=10)
        async with aiohttp.ClientSession(timeout=timeout,
                                         connector=aiohttp.TCPConnector(limit=0)) as session:
            shared = [prefix + toks(rng, n) for n in range(5, 5 + 26 * 9, 9)]  # 26 prompts
            first = [Spec("completion", p, i % 3 == 1) for i, p in enumerate(shared[:18])]
            first += [Spec("chat", p, i % 2 == 1) for i, p in enumerate(shared[18:26])]
            first += [Spec("completion", toks(rng, n), n % 2 == 0) for n in (40, 77, 130, 200)]
            first += [Spec("chat", toks(rng, n), False) for n in (60, 150)]
            delta = await self.round(session, "round-1", first)
            moved = sum(delta[d.name].get("vllm:fabric_num_transfers", 0) for d in self.decode)
            self.need(moved == len(first), f"round-1: {moved} loads of {len(first)} requests")
            for d in self.decode:
                self.need(delta[d.name].get("vllm:fabric_num_transfers", 0) > 0,
                          f"round-1: {d.name} loaded nothing")
                self.need(delta[d.name].get("vllm:fabric_num_failed_transfers", 0) == 0,
                          f"round-1: {d.name} failed loads")
            for p in self.prefill:
                self.need(delta[p.name].get("vllm:fabric_num_sends", 0) > 0,
                          f"round-1: {p.name} sent nothing")

            self.check_threads()
            await self.bad(session)

            again = [prefix + toks(rng, n) for n in range(7, 7 + 16 * 11, 11)]
            second = [Spec("completion", p, i % 2 == 0) for i, p in enumerate(again[:12])]
            second += [Spec("chat", p, True) for p in again[12:]]
            second += [Spec(s.kind, s.tokens, not s.stream) for s in first[:16]]
            delta = await self.round(session, "round-2", second)
            moved = sum(delta[d.name].get("vllm:fabric_num_transfers", 0) for d in self.decode)
            self.need(moved >= len(again), f"round-2: {moved} loads, {len(again)} new prompts")
            for d in self.decode:
                for key in ("vllm:fabric_num_failed_transfers", "vllm:fabric_num_expired_reqs"):
                    self.need(delta[d.name].get(key, 0) == 0, f"round-2: {d.name} {key}")

    def check_logs(self) -> None:
        for p in self.prefill + self.decode:
            self.need(p.proc.poll() is None and p.healthy(), f"logs: {p.name} no longer serves")
            bad = [l for l in p.log().splitlines() if BAD_LOG.search(l)]
            self.need(not bad, f"logs: {p.name}: {bad[:5]}")


def toks(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(FIRST_WORD, VOCAB) for _ in range(n)]


def error_leg(error: object) -> str | None:
    return error.get("error", {}).get("leg") if isinstance(error, dict) else None


def error_message(error: object) -> str:
    return str(error.get("error", {}).get("message", "")) if isinstance(error, dict) else ""


def main(argv: list[str]) -> int:
    # --shape PxD: how many prefill and decode servers (2x2 by default).
    shape = argv[argv.index("--shape") + 1] if "--shape" in argv else "2x2"
    prefills, decodes = (int(n) for n in shape.split("x"))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fabric-serving-") as workdir:
        model = os.path.join(workdir, "model")
        make_model(model)
        make_tokenizer(model)
        run = Run(workdir)
        try:
            run.start(prefills, decodes)
            print(f"servers and proxy up after {time.monotonic() - started:.0f} s", flush=True)
            asyncio.run(run.cases())
            run.check_logs()
        except Exception as e:  # noqa: BLE001 - reported with every log
            run.failures.append(f"{type(e).__name__}: {e}")
        finally:
            # Consumers before producers: a producer gone first would be reported "silent" by
            # the consumers still running (after the log check, but it reads like a finding).
            for p in reversed(run.procs):
                p.close()
        keep = os.environ.get("FABRIC_TEST_KEEP_LOGS")  # a directory to copy the logs to
        if keep:
            os.makedirs(keep, exist_ok=True)
            for p in run.procs:
                shutil.copy(p.log_path, keep)
        if run.failures:
            for p in run.procs:
                print(f"----- {p.name} log (tail) -----\n" + "\n".join(p.log().splitlines()[-60:]))
    REAPER.close()
    for f in run.failures:
        print("FAIL:", f)
    print(f"{'FAILED' if run.failures else 'passed'}; took {time.monotonic() - started:.0f} s")
    return 1 if run.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
