"""The benchmark's model, made locally: a random-weight Llama and a word-level tokenizer of the
same vocabulary, so vLLM's OpenAI server and its benchmark client run on it with no download.

Why a word-level tokenizer: every id decodes to one distinct space-separated word, so a
completion's text determines its token ids exactly and comparing texts across the setups is
comparing tokens. No special tokens: any id the model picks decodes to a visible word."""

from __future__ import annotations

import json
import os


def words(vocab: int) -> list[str]:
    return [f"w{i}" for i in range(vocab)]


def make_tokenizer(path: str, vocab: int) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words(vocab))}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1 << 20,
                   "clean_up_tokenization_spaces": False}, f)


def make_model(path: str, *, hidden: int, layers: int, heads: int, kv_heads: int, vocab: int,
               max_len: int) -> int:
    """Writes the model and its tokenizer to path; returns the KV bytes one prompt token takes."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    head_dim = hidden // heads
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        max_position_embeddings=max_len,
        initializer_range=0.2,  # sharp logits: greedy picks are not near-ties across setups
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
    )
    LlamaForCausalLM(config).to(torch.float32).save_pretrained(path)
    make_tokenizer(path, vocab)
    return layers * 2 * kv_heads * head_dim * 4
