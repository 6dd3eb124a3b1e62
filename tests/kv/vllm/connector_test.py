"""FabricConnector inside real CPU-only vLLM: a producer and a consumer instance (one core each) on
a tiny random Llama made here. The consumer's output token ids must equal a plain run's, and a
control set whose transferred KV is overwritten after landing must give different tokens.

Run by tests/kv/vllm/run.sh (ctest kv.vllm_connector) with the venv of scripts/vllm-venv.sh:
    connector_test.py            the test (spawns the two instances)
    connector_test.py producer D / consumer D   one instance, working in directory D
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

PROMPT_LENGTHS = [9, 33, 64, 100, 170]
MAX_TOKENS = 8
STEP_S = 600  # the longest any one instance may take


def prompts() -> list[list[int]]:
    import random

    rng = random.Random(7)
    return [[rng.randrange(1, 500) for _ in range(n)] for n in PROMPT_LENGTHS]


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


def engine(workdir: str, role: str):
    from vllm import LLM
    from vllm.config import KVTransferConfig

    transfer = KVTransferConfig(
        kv_connector="FabricConnector",
        kv_connector_module_path="fabric_lib.vllm.connector",
        kv_role=role,
        kv_connector_extra_config={
            "address_file": os.path.join(workdir, "producer.addr"),
            "provider": "tcp",
        },
    )
    return LLM(
        model=os.path.join(workdir, "model"),
        skip_tokenizer_init=True,
        dtype="float32",
        block_size=32,
        max_model_len=512,
        max_num_batched_tokens=1024,
        max_num_seqs=16,
        enforce_eager=True,
        enable_prefix_caching=False,
        seed=0,
        kv_transfer_config=transfer,
    )


def sampling(max_tokens: int, params: dict | None):
    from vllm import SamplingParams

    extra = {"kv_transfer_params": params} if params is not None else None
    return SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True, extra_args=extra)


def token_ids(outputs) -> list[list[int]]:
    return [list(o.outputs[0].token_ids) for o in outputs]


def run_producer(workdir: str) -> None:
    llm = engine(workdir, "kv_producer")
    ps = [{"prompt_token_ids": p} for p in prompts()]
    # The plain single-instance run: no kv_transfer_params, so the connector stays out of it.
    baseline = token_ids(llm.generate(ps, [sampling(MAX_TOKENS, None)] * len(ps)))
    with open(os.path.join(workdir, "baseline.json"), "w") as f:
        json.dump(baseline, f)
    # Prefill only, for both sets; the KV goes to the consumer layer by layer.
    params = [sampling(1, {"fabric_id": f"{kind}-{i}"}) for kind in ("ok", "bad") for i in range(len(ps))]
    llm.generate(ps + ps, params)
    deadline = time.monotonic() + STEP_S
    done = os.path.join(workdir, "consumer.done")
    while not os.path.exists(done):  # keep the source pages until the consumer has them
        if time.monotonic() > deadline:
            raise TimeoutError("the consumer never finished")
        time.sleep(0.2)


def run_consumer(workdir: str) -> None:
    try:
        llm = engine(workdir, "kv_consumer")
        ps = [{"prompt_token_ids": p} for p in prompts()]
        params = [
            sampling(MAX_TOKENS, {"fabric_id": f"{kind}-{i}", "fabric_corrupt": kind == "bad"})
            for kind in ("ok", "bad")
            for i in range(len(ps))
        ]
        out = token_ids(llm.generate(ps + ps, params))
        with open(os.path.join(workdir, "consumer.json"), "w") as f:
            json.dump(out, f)
    finally:
        open(os.path.join(workdir, "consumer.done"), "w").close()


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


def main() -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fabric-vllm-") as workdir:
        make_model(os.path.join(workdir, "model"))
        cores = os.sched_getaffinity(0)
        second = 1 if len(cores) > 1 else 0
        procs = {
            role: subprocess.Popen(
                [sys.executable, __file__, role, workdir],
                env=instance_env(core),
                stdout=open(os.path.join(workdir, f"{role}.log"), "w"),
                stderr=subprocess.STDOUT,
            )
            for role, core in (("producer", 0), ("consumer", second))
        }
        failed = []
        try:
            for role in ("consumer", "producer"):
                try:
                    rc = procs[role].wait(timeout=STEP_S)
                except subprocess.TimeoutExpired:
                    rc = "timeout"
                if rc != 0:
                    failed.append(f"{role}: {rc}")
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait(30)
        if failed:
            for role in procs:
                with open(os.path.join(workdir, f"{role}.log")) as f:
                    print(f"----- {role} log (tail) -----\n" + "".join(f.readlines()[-60:]))
            print("FAILED:", ", ".join(failed))
            return 1
        with open(os.path.join(workdir, "baseline.json")) as f:
            baseline = json.load(f)
        with open(os.path.join(workdir, "consumer.json")) as f:
            out = json.load(f)
    n = len(baseline)
    ok, bad = out[:n], out[n:]
    print("baseline  :", baseline)
    print("consumer  :", ok)
    print("corrupted :", bad)
    passed = 0
    failures = 0
    for i, length in enumerate(PROMPT_LENGTHS):
        if ok[i] == baseline[i]:
            passed += 1
        else:
            failures += 1
            print(f"FAIL: prompt of {length} tokens: consumer {ok[i]} != plain run {baseline[i]}")
    # Only completed outputs count: a failed load gives no tokens, which proves nothing.
    differ = sum(1 for i in range(n) if len(bad[i]) == MAX_TOKENS and bad[i] != baseline[i])
    # Prompts whose KV came over (length > 1) must change when that KV is corrupted.
    if differ == 0:
        failures += 1
        print("FAIL: corrupting the transferred KV changed no output: was it used at all?")
    else:
        passed += 1
    print(f"corrupted KV changed {differ} of {n} outputs; took {time.monotonic() - started:.0f} s")
    print(f"{passed} passed, {failures} failed")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "producer":
        run_producer(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "consumer":
        run_consumer(sys.argv[2])
    else:
        sys.exit(main())
