"""LoRA adapters in PEFT's on-disk format: `adapter_config.json` and `adapter_model.safetensors`, with PEFT's
key names (`base_model.model.<HF module>.lora_A.weight` [rank, in], `.lora_B.weight` [out, rank]), so an
adapter tbjax trains loads with `peft.PeftModel.from_pretrained` onto the HF base, into SGLang's
`/load_lora_adapter`, and an adapter PEFT trained loads here.

The HF module of each adapted projection comes from the same layout table as the base weights
(tbjax.models.hf.layout), so the adapter's names can never disagree with the checkpoint's. Our A is
nnx.LoRA's [in, rank] and B [rank, out], each PEFT's transposed; the in and out dims flatten in HF's order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from tbjax.models.hf.layout import hf_layouts
from tbjax.models.lora import AdapterPath, LoraError, LoraSpec, adapted_projections, add_adapters
from tbjax.models.qwen import Qwen

CONFIG = "adapter_config.json"
WEIGHTS = "adapter_model.safetensors"
PREFIX = "base_model.model."


def _module_names(model: Qwen) -> dict[AdapterPath, str]:
    """Adapted projection path -> its HF module name (model.layers.3.self_attn.q_proj)."""
    layouts = hf_layouts(model.config)
    return {path: str(layouts[(*path, "kernel")].names.item()).removesuffix(".weight")
            for path in adapted_projections(model)}


def save_adapter(model: Qwen, spec: LoraSpec, out: Path, base_model: str = "") -> Path:
    """Writes `model`'s adapters to `out` in PEFT's format (float32); returns `out`."""
    projections = adapted_projections(model)
    if not projections:
        raise LoraError("the model has no adapters to save (tbjax.models.lora.add_adapters)")
    names = _module_names(model)
    tensors = {}
    for path, projection in projections.items():
        lora = projection.adapter.lora
        tensors[f"{PREFIX}{names[path]}.lora_A.weight"] = np.ascontiguousarray(np.asarray(lora.lora_a[...]).T)
        tensors[f"{PREFIX}{names[path]}.lora_B.weight"] = np.ascontiguousarray(np.asarray(lora.lora_b[...]).T)
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / WEIGHTS), metadata={"format": "pt"})
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": base_model,
              "r": spec.rank, "lora_alpha": spec.alpha, "lora_dropout": 0.0, "bias": "none",
              "target_modules": sorted({name.rsplit(".", 1)[-1] for name in names.values()}),
              "fan_in_fan_out": False, "use_rslora": False, "use_dora": False, "init_lora_weights": True,
              "modules_to_save": None, "inference_mode": True}
    (out / CONFIG).write_text(json.dumps(config, indent=2))
    return out


def _spec(config: dict[str, Any], source: Path) -> LoraSpec:
    """The LoraSpec of a PEFT config, refusing what tbjax does not compute the same way."""
    if config.get("peft_type") != "LORA":
        raise LoraError(f"{source}: peft_type {config.get('peft_type')!r}, expected 'LORA'")
    for key, want in (("use_rslora", False), ("use_dora", False), ("fan_in_fan_out", False), ("bias", "none")):
        if config.get(key, want) != want:
            raise LoraError(f"{source}: {key}={config[key]!r} is not supported (tbjax computes {key}={want!r})")
    for key in ("rank_pattern", "alpha_pattern", "modules_to_save", "layers_to_transform"):
        if config.get(key):
            raise LoraError(f"{source}: {key} is not supported; every adapter shares r and lora_alpha")
    targets = config.get("target_modules")
    if isinstance(targets, str) or not targets:
        raise LoraError(f"{source}: target_modules must list module names, got {targets!r}")
    return LoraSpec(rank=int(config["r"]), alpha=float(config["lora_alpha"]), targets=tuple(sorted(targets)))


def load_adapter(model: Qwen, directory: Path) -> LoraSpec:
    """Adds the adapters saved in PEFT's format at `directory` to `model` (in place); returns their spec.
    Every adapted projection must find its A and B with the right shapes, and every tensor in the file must
    find its projection."""
    directory = Path(directory)
    if not (directory / CONFIG).is_file() or not (directory / WEIGHTS).is_file():
        raise LoraError(f"{directory} holds no PEFT adapter: it needs {CONFIG} and {WEIGHTS}")
    try:
        config = json.loads((directory / CONFIG).read_text())
        tensors = load_file(str(directory / WEIGHTS))
    except (OSError, ValueError, SafetensorError) as error:  # a corrupt header, truncated file, bad JSON
        raise LoraError(f"{directory}: unreadable adapter ({error}); save it again") from error
    if not isinstance(config, dict):
        raise LoraError(f"{directory / CONFIG}: expected a JSON object")
    spec = _spec(config, directory / CONFIG)
    add_adapters(model, spec)
    names = _module_names(model)
    unused = set(tensors)
    for path, projection in adapted_projections(model).items():
        lora = projection.adapter.lora
        for part, variable in (("lora_A", lora.lora_a), ("lora_B", lora.lora_b)):
            key = f"{PREFIX}{names[path]}.{part}.weight"
            if key not in tensors:
                raise LoraError(f"{directory / WEIGHTS} has no {key}: the adapter does not cover this model")
            value = tensors[key].T
            if value.shape != variable.shape:
                raise LoraError(f"{key}: shape {tensors[key].shape[::-1]} where this model needs "
                                f"{variable.shape[::-1]} (r={spec.rank})")
            variable[...] = value.astype(np.float32)
            unused.discard(key)
    if unused:
        raise LoraError(f"{directory / WEIGHTS}: {len(unused)} tensors name no adapted projection of this model, "
                        f"e.g. {sorted(unused)[0]}")
    return spec
