"""FabricConnector inside real CPU-only vLLM, under vLLM's defaults (prefix caching and chunked
prefill on): a producer and two consumers, one with vLLM's default kv_load_failure_policy "fail"
and one with "recompute", on a tiny random Llama made here, shared by every case. Every output
that completes must equal, token for token, a plain run of the same prompt on the producer (no
kv_transfer_params: the connector stays out of it), and the connector's counts show the KV came
over the fabric.

Cases, in order, on the same instances (the consumers are never restarted):
  shared-1/2  prompts sharing a 3-block prefix over two rounds: the second round hits both
              instances' prefix caches (the consumer loads only the blocks past its hit, the
              producer sends its cached blocks too); a control set whose landed KV is
              overwritten must change its outputs.
  chunked     a batch over max_num_batched_tokens and a prompt longer than it.
  duplicate   one id twice in a batch (a client retry): under "fail" only it may fail and the
              one that completes is right; under "recompute" both are right.
  after       the next batch: every output right on both consumers; malformed
              kv_transfer_params run locally, right tokens.
  returned    the producer's returned kv_transfer_params forwarded to the consumer as they are.
  never       an id the producer never prefills: fails within load_timeout_s under "fail",
              right tokens under "recompute".
  aborted     a client abort while the KV is awaited stops the load at once.
  kill        the producer SIGKILLed with requests waiting for it: they fail within 15 s.
  stale       the address file still names the dead producer: requests fail at once.
  restarted   a new producer writes its address: both consumers use it, every output right.

Run by tests/support/in-vllm-venv.sh (ctest kv.vllm_connector) with the venv of scripts/vllm-venv.sh:
    connector_test.py                        the test (spawns the instances)
    connector_test.py serve NAME ROLE POLICY DIR   one instance (JSON commands on stdin)
"""

from __future__ import annotations

import json
import os
import random
import select
import subprocess
import sys
import tempfile
import time

MAX_TOKENS = 6
BLOCK = 32
BUDGET = 512  # max_num_batched_tokens: small, so batches and one prompt exceed it
START_S = 600  # the longest an instance may take to start
STEP_S = 300  # the longest one batch may take
LOAD_TIMEOUT_S = 10  # the consumers' load_timeout_s
DEAD_BOUND_S = 15  # requests waiting for a killed producer fail within this


# ---------------------------------------------------------------------------- the instances


def make_model(path: str) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=512,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=1024,
        initializer_range=0.2,  # sharper logits than the default: greedy picks are not ties
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).to(torch.float32).save_pretrained(path)


def engine(workdir: str, role: str, policy: str):
    from vllm import LLM
    from vllm.config import KVTransferConfig

    transfer = KVTransferConfig(
        kv_connector="FabricConnector",
        kv_connector_module_path="fabric_lib.vllm.connector",
        kv_role=role,
        kv_load_failure_policy=policy,
        kv_connector_extra_config={
            "address_file": os.path.join(workdir, "producer.addr"),
            "provider": "tcp",
            "load_timeout_s": LOAD_TIMEOUT_S,
        },
    )
    # vLLM's defaults but for the model's size: prefix caching and chunked prefill stay on.
    return LLM(
        model=os.path.join(workdir, "model"),
        skip_tokenizer_init=True,
        dtype="float32",
        block_size=BLOCK,
        max_model_len=1024,
        max_num_batched_tokens=BUDGET,
        max_num_seqs=16,
        enforce_eager=True,
        disable_log_stats=False,  # the connector's vllm:fabric_* metrics are checked
        seed=0,
        kv_transfer_config=transfer,
    )


def serve(role: str, policy: str, workdir: str) -> None:
    """One instance: a JSON command per stdin line, a JSON reply per line on its reply pipe."""
    from vllm import SamplingParams
    from vllm.distributed.kv_transfer import get_kv_transfer_group

    replies = os.fdopen(int(os.environ["FABRIC_TEST_REPLY_FD"]), "w", buffering=1)
    llm = engine(workdir, role, policy)
    connector = get_kv_transfer_group()  # the worker's (in-process engine core)
    replies.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "exit":
            break
        if cmd["op"] == "abort":
            replies.write(json.dumps(abort_while_loading(llm, connector, cmd)) + "\n")
            continue
        started = time.monotonic()
        params = []
        given = cmd.get("params") or [None] * len(cmd["ids"])
        for fid, corrupt, kv_params in zip(cmd["ids"], cmd["corrupt"], given):
            extra = None
            if kv_params is not None:  # as the producer returned them
                extra = {"kv_transfer_params": kv_params}
            elif fid is not None:
                extra = {"kv_transfer_params": {"fabric_id": fid, "fabric_corrupt": corrupt}}
            params.append(SamplingParams(temperature=0.0, max_tokens=cmd["max_tokens"],
                                         ignore_eos=True, extra_args=extra))
        outs = llm.generate([{"prompt_token_ids": p} for p in cmd["prompts"]], params,
                            use_tqdm=False)
        result = [{"tokens": list(o.outputs[0].token_ids),
                   "finish": str(o.outputs[0].finish_reason),
                   "kv_transfer_params": getattr(o, "kv_transfer_params", None)} for o in outs]
        replies.write(json.dumps({"outputs": result, "seconds": time.monotonic() - started,
                                  "counts": dict(connector.counts),
                                  "metrics": fabric_metrics(llm)}) + "\n")


def fabric_metrics(llm) -> dict[str, float]:
    """vLLM's own metrics of the connector (what /metrics serves): counter values, histogram
    counts."""
    out = {}
    for m in llm.get_metrics():
        if m.name.startswith("vllm:fabric_"):
            out[m.name] = getattr(m, "value", getattr(m, "count", None))
    return out


def abort_while_loading(llm, connector, cmd: dict) -> dict:
    """A client abort while the request waits for its KV: the load must stop well before
    load_timeout_s (the consumer's blocks are held until it does)."""
    from vllm import SamplingParams

    engine = llm.llm_engine
    failures = connector.counts["load_failures"]
    params = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True,
                            extra_args={"kv_transfer_params": {"fabric_id": cmd["id"]}})
    engine.add_request(cmd["id"], {"prompt_token_ids": cmd["prompt"]}, params)
    engine.step()  # scheduled: it waits for its KV, the load is asked for
    asked = connector.counts
    engine.abort_request([cmd["id"]])
    started = time.monotonic()
    while connector.counts["load_failures"] == failures and time.monotonic() - started < STEP_S:
        engine.step()  # vLLM keeps stepping while the aborted request holds its blocks
    return {"seconds": time.monotonic() - started, "counts": dict(connector.counts),
            "outputs": [], "asked": dict(asked)}


def instance_env(core: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CPU_OMP_THREADS_BIND": str(core),
            "OMP_NUM_THREADS": "1",
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
            "FI_TCP_IFACE": "lo",
            "FI_SOCKETS_IFACE": "lo",
            "TOKENIZERS_PARALLELISM": "false",
        }
    )
    return env


def die_with_parent() -> None:
    """In the child before exec: SIGKILL when the test process dies, however it dies (a ctest
    timeout kills only the test process)."""
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Instance:
    """A serve() child: commands in, replies out, every wait bounded, killed on close."""

    def __init__(self, name: str, role: str, policy: str, workdir: str, core: int) -> None:
        self.role = name
        self.counts: dict[str, int] = {}
        self.log_path = os.path.join(workdir, f"{name}.log")
        read_end, write_end = os.pipe()
        env = instance_env(core)
        env["FABRIC_TEST_REPLY_FD"] = str(write_end)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "serve", name, role, policy, workdir],
            env=env,
            stdin=subprocess.PIPE,
            stdout=open(self.log_path, "w"),
            stderr=subprocess.STDOUT,
            pass_fds=(write_end,),
            preexec_fn=die_with_parent,
            text=True,
        )
        os.close(write_end)
        self.replies = os.fdopen(read_end, "r")

    def send(self, cmd: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def reply(self, timeout_s: float) -> dict:
        ready, _, _ = select.select([self.replies], [], [], timeout_s)
        if not ready:
            raise TimeoutError(f"{self.role}: no reply within {timeout_s:.0f} s")
        line = self.replies.readline()
        if not line:
            raise RuntimeError(f"{self.role} exited (rc {self.proc.wait(30)})")
        return json.loads(line)

    def generate(self, batch: list[tuple[str | None, list[int], bool]], max_tokens: int,
                 params: list[dict] | None = None) -> None:
        self.send({"op": "generate", "ids": [b[0] for b in batch], "prompts": [b[1] for b in batch],
                   "corrupt": [b[2] for b in batch], "max_tokens": max_tokens, "params": params})

    def outputs(self, timeout_s: float = STEP_S) -> tuple[list[dict], dict[str, int], float]:
        """This batch's outputs, the change of the connector's counts, and its seconds."""
        r = self.reply(timeout_s)
        self.metrics = r.get("metrics", {})
        delta = {k: v - self.counts.get(k, 0) for k, v in r["counts"].items()}
        self.counts = r["counts"]
        return r["outputs"], delta, r["seconds"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)

    def log_tail(self, lines: int = 80) -> str:
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])


# ---------------------------------------------------------------------------- the cases


def tokens(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(1, 500) for _ in range(n)]


class Run:
    """The instances and the checks; every failure is collected, never skipped."""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.instances: list[Instance] = []  # every one started, so that each is killed
        self.failures: list[str] = []

    def start(self, name: str, role: str, policy: str, core: int) -> Instance:
        inst = Instance(name, role, policy, self.workdir, core)
        self.instances.append(inst)
        return inst

    def start_all(self) -> None:
        cores = sorted(os.sched_getaffinity(0))
        self.producer = self.start("producer", "kv_producer", "fail", cores[0])
        self.fail = self.start("consumer", "kv_consumer", "fail", cores[-1])
        self.recompute = self.start("recompute", "kv_consumer", "recompute", cores[0])
        for inst in self.instances:
            inst.reply(START_S)

    def plain(self, prompts: list[list[int]]) -> dict[str, list[int]]:
        """The plain runs on the producer, after the transfer so that its prefix cache holds only
        earlier cases' prompts while it prefills a case."""
        unique = list({json.dumps(p): p for p in prompts}.values())
        self.producer.generate([(None, p, False) for p in unique], MAX_TOKENS)
        outs, _, _ = self.producer.outputs()
        return {json.dumps(p): o["tokens"] for p, o in zip(unique, outs)}

    def expect(self, case: str, who: Instance, batch, outs, baseline, may_fail=()) -> None:
        for (fid, prompt, corrupt), out in zip(batch, outs):
            if corrupt:
                continue
            if fid in may_fail and out["finish"] != "length":
                continue
            want = baseline[json.dumps(prompt)]
            if out["tokens"] != want or out["finish"] != "length":
                self.failures.append(f"{case}/{who.role}/{fid} ({len(prompt)} tokens): "
                                     f"{out['tokens']} ({out['finish']}) != plain {want}")

    def need(self, cond: bool, what: str) -> None:
        if not cond:
            self.failures.append(what)

    def transfer(self, case: str, consumers: dict[Instance, list], prefill: list | None = None,
                 may_fail=()) -> dict[Instance, tuple]:
        """Prefill on the producer (one token) while the consumers decode; checks every output
        against the plain run."""
        prefill = prefill if prefill is not None else [b for bs in consumers.values() for b in bs]
        if prefill:
            self.producer.generate(prefill, 1)
        for who, batch in consumers.items():
            who.generate(batch, MAX_TOKENS)
        got = {who: who.outputs() for who in consumers}
        if prefill:
            got[self.producer] = self.producer.outputs()
            print(f"{case}/producer: counts {got[self.producer][1]}", flush=True)
        baseline = self.plain([p for bs in consumers.values() for _, p, _ in bs])
        for who, batch in consumers.items():
            outs, counts, seconds = got[who]
            self.expect(case, who, batch, outs, baseline, may_fail)
            print(f"{case}/{who.role}: {len(batch)} requests in {seconds:.1f} s, finish "
                  f"{[o['finish'] for o in outs]}, counts {counts}", flush=True)
        return got

    def cases(self) -> None:
        rng = random.Random(7)
        prefix = tokens(rng, 3 * BLOCK)
        first = [prefix + tokens(rng, n) for n in (1, 5, 31, 32, 40, 77)]
        second = [prefix + tokens(rng, n) for n in (3, 33, 64, 90)]
        control = [tokens(rng, n) for n in (40, 70, 100)]  # unshared: nothing reuses their blocks
        F, R = self.fail, self.recompute

        batch = [(f"s1-{i}", p, False) for i, p in enumerate(first)]
        batch += [(f"ctl-{i}", p, True) for i, p in enumerate(control)]
        got = self.transfer("shared-1", {F: batch})
        outs, counts, _ = got[F]
        baseline = self.plain(control)
        changed = sum(1 for (_, p, c), o in zip(batch, outs)
                      if c and o["tokens"] != baseline[json.dumps(p)])
        self.need(changed > 0, "shared-1: corrupting the landed KV changed no output")
        self.need(counts["loads"] == len(batch), f"shared-1: {counts['loads']} loads")
        # The same in vLLM's own metrics (/metrics), as NixlConnector's vllm:nixl_* are.
        print(f"shared-1: consumer metrics {F.metrics}", flush=True)
        self.need(F.metrics.get("vllm:fabric_num_transfers", 0) >= len(batch)
                  and F.metrics.get("vllm:fabric_bytes_transferred", 0) >= len(batch),
                  f"shared-1: vLLM metrics {F.metrics}")

        # Round two: new suffixes of the cached prefix, and round one's prompts under new ids.
        batch = [(f"s2-{i}", p, False) for i, p in enumerate(second + first)]
        counts = self.transfer("shared-2", {F: batch})[F][1]
        self.need(counts["offset_loads"] >= len(second),
                  f"shared-2: {counts['offset_loads']} loads past a local prefix hit")
        self.need(counts["load_failures"] == 0, "shared-2: a load failed")
        # The one prompt its prefix cache covers whole (96 + 1 tokens) is declined, so the
        # producer ends its send at once instead of after receiver_timeout_ms.
        self.need(counts["declines"] == 1, f"shared-2: {counts['declines']} declines")
        sends_before = self.producer.counts["sends"]

        chunked = [tokens(rng, n) for n in (150, 190, 120, 170)] + [tokens(rng, 700)]
        batch = [(f"c-{i}", p, False) for i, p in enumerate(chunked)]
        got = self.transfer("chunked", {F: batch})
        counts = got[F][1]
        self.need(counts["loads"] == len(batch), f"chunked: {counts['loads']} loads")
        # Every send of the rounds before has ended done by now, the declined one included.
        done = got[self.producer][1]
        self.need(self.producer.counts["sends_done"] >= sends_before,
                  f"chunked: {self.producer.counts['sends_done']} of {sends_before} earlier "
                  f"sends done ({done})")
        # Blocks of earlier chunks went during their own steps, not with the last chunk.
        self.need(got[self.producer][1]["early_chunks"] > 0, "chunked: no block sent early")

        dup = tokens(rng, 60)
        other = tokens(rng, 45)
        got = self.transfer("duplicate", {
            F: [("dup", dup, False), ("d-0", other, False), ("dup", dup, False)],
            R: [("rdup", dup, False), ("rd-0", other, False), ("rdup", dup, False)],
        }, may_fail=("dup",))
        finishes = [o["finish"] for o in got[F][0]]
        self.need(finishes.count("length") >= 2, f"duplicate: finishes {finishes}")

        after = [prefix + tokens(rng, 20), tokens(rng, 45), tokens(rng, 130)]
        # Plus malformed kv_transfer_params: that request runs locally on both, right tokens.
        self.transfer("after", {F: [(f"a-{i}", p, False) for i, p in enumerate(after)]
                                + [(["not", "an", "id"], tokens(rng, 33), False)],
                                R: [(f"ra-{i}", p, False) for i, p in enumerate(after)]})

        # The producer's returned kv_transfer_params, forwarded as they are (what a proxy does):
        # they name the producer, so the consumer needs no address file for them.
        ret = [(f"ret-{i}", tokens(rng, n), False) for i, n in enumerate((35, 70))]
        self.producer.generate(ret, 1)
        outs, _, _ = self.producer.outputs()
        returned = [o["kv_transfer_params"] for o in outs]
        print(f"returned: {returned}", flush=True)
        self.need(all(r and r.get("fabric_address") and r.get("fabric_id") == fid
                      for r, (fid, _, _) in zip(returned, ret)), f"returned: {returned}")
        if all(returned):
            F.generate(ret, MAX_TOKENS, params=returned)
            outs, counts, _ = F.outputs()
            self.expect("returned", F, ret, outs, self.plain([p for _, p, _ in ret]))
            self.need(counts["loads"] == len(ret), f"returned: {counts['loads']} loads")

        never = tokens(rng, 80)
        got = self.transfer("never", {F: [("never-0", never, False)],
                                      R: [("rnever-0", never, False)]}, prefill=[],
                            may_fail=("never-0",))
        outs, counts, seconds = got[F]
        self.need(outs[0]["finish"] == "error", f"never: finished {outs[0]['finish']}")
        self.need(seconds < LOAD_TIMEOUT_S + 10, f"never: failed after {seconds:.1f} s")
        self.need(got[R][1]["load_failures"] == 1, "never: recompute saw no load failure")
        self.need(F.metrics.get("vllm:fabric_num_expired_reqs", 0) >= 1,
                  f"never: vLLM metrics {F.metrics}")

        # A client abort while the KV is awaited stops the load at once, not at load_timeout_s.
        F.send({"op": "abort", "id": "aborted-0", "prompt": tokens(rng, 64)})
        _, counts, seconds = F.outputs()
        print(f"aborted: load stopped {seconds:.2f} s after the abort, counts {counts}", flush=True)
        self.need(counts["load_failures"] == 1 and seconds < LOAD_TIMEOUT_S / 2,
                  f"aborted: {counts}, {seconds:.1f} s")

        # The producer dies with requests waiting for it (it never prefills them).
        F.generate([(f"k-{i}", tokens(rng, 50 + 10 * i), False) for i in range(3)], MAX_TOKENS)
        self.producer.proc.kill()
        killed = time.monotonic()
        outs, _, _ = F.outputs()
        waited = time.monotonic() - killed
        print(f"kill: {[o['finish'] for o in outs]} {waited:.1f} s after the kill", flush=True)
        self.need(all(o["finish"] == "error" for o in outs), f"kill: {outs}")
        self.need(waited < DEAD_BOUND_S, f"kill: requests failed {waited:.1f} s after the kill")
        self.producer.close()

        F.generate([(f"st-{i}", tokens(rng, 40), False) for i in range(2)], MAX_TOKENS)
        outs, _, seconds = F.outputs()
        print(f"stale: {[o['finish'] for o in outs]} in {seconds:.1f} s", flush=True)
        self.need(all(o["finish"] == "error" for o in outs), f"stale: {outs}")
        # One connect to the dead address (kv re-admits a fenced rank that answers), bounded
        # by connect_timeout_s (3 s); then it is known to have failed.
        self.need(seconds < 3 + 2, f"stale: failed after {seconds:.1f} s")

        self.producer = self.start("producer2", "kv_producer", "fail",
                                   sorted(os.sched_getaffinity(0))[0])
        self.producer.reply(START_S)
        again = [prefix + tokens(rng, 50), tokens(rng, 64), tokens(rng, 200)]
        got = self.transfer("restarted", {F: [(f"r-{i}", p, False) for i, p in enumerate(again)],
                                          R: [(f"rr-{i}", p, False) for i, p in enumerate(again)]})
        for who in (F, R):
            self.need(got[who][1]["loads"] == len(again),
                      f"restarted/{who.role}: {got[who][1]['loads']} loads")


def main() -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fabric-vllm-") as workdir:
        make_model(os.path.join(workdir, "model"))
        run = Run(workdir)
        try:
            run.start_all()
            print(f"instances up after {time.monotonic() - started:.0f} s", flush=True)
            run.cases()
        except Exception as e:  # noqa: BLE001 - reported with every log
            run.failures.append(f"{type(e).__name__}: {e}")
        finally:
            for inst in run.instances:
                inst.close()
        if run.failures:
            for inst in run.instances:
                print(f"----- {inst.role} log (tail) -----\n{inst.log_tail()}")
    for f in run.failures:
        print("FAIL:", f)
    print(f"{'FAILED' if run.failures else 'passed'}; took {time.monotonic() - started:.0f} s")
    return 1 if run.failures else 0


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "serve":
        serve(sys.argv[3], sys.argv[4], sys.argv[5])
    else:
        sys.exit(main())
