"""The test's model: a random Llama-shaped checkpoint made here (no downloads), and version v's
weights as a deterministic function of (base, v), so that trainers, the driver and the fresh
reference instance compute the same tensors without shipping them around."""

from __future__ import annotations

import json
import os
import zlib

import numpy as np

NOISE = 0.05  # per version, against initializer_range 0.2: greedy tokens change between versions


def make_model(path: str, hidden: int = 256, layers: int = 4, intermediate: int = 768, vocab: int = 2048) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=hidden // 32,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=512,
        initializer_range=0.2,  # sharp logits: greedy picks are not near-ties
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).to(torch.float32).save_pretrained(path)


def base_weights(path: str) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(os.path.join(path, "model.safetensors"))


def version_weights(base: dict[str, np.ndarray], version: int) -> dict[str, np.ndarray]:
    """Version v: every weight of the base plus its own noise (seeded by name and v)."""
    out = {}
    for name, w in base.items():
        rng = np.random.default_rng([zlib.crc32(name.encode()), version])
        out[name] = (w + NOISE * rng.standard_normal(w.shape, dtype=np.float32)).astype(np.float32)
    return out


def save_version(base_dir: str, weights: dict[str, np.ndarray], path: str) -> None:
    """A checkpoint directory for a fresh vLLM: the base's config, these weights."""
    from safetensors.numpy import save_file

    os.makedirs(path, exist_ok=True)
    for f in os.listdir(base_dir):
        if f.endswith(".json"):
            with open(os.path.join(base_dir, f)) as src, open(os.path.join(path, f), "w") as dst:
                json.dump(json.load(src), dst)
    save_file(weights, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})


def trainer_metadata(base: dict[str, np.ndarray], ranks: int) -> list[dict]:
    """The trainer's parameters as FSDP shards them: dim 0 over `ranks` (torch.chunk sizes)."""
    from fabric_lib.weights import Shard

    return [{"name": n, "shape": list(w.shape), "dtype": "float32", "placements": [Shard(0)], "group": "all"}
            for n, w in sorted(base.items())]


def shard(weights: dict[str, np.ndarray], meta: list[dict], ranks: int, rank: int) -> dict[str, np.ndarray]:
    from fabric_lib.weights import local_box

    out = {}
    for p in meta:
        lo, hi = local_box(p["shape"], p["placements"], [("fsdp", ranks)], [rank])
        out[p["name"]] = np.ascontiguousarray(weights[p["name"]][tuple(slice(a, b) for a, b in zip(lo, hi))])
    return out
