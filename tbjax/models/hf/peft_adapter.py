"""LoRA adapters in PEFT's on-disk format: `adapter_config.json` and `adapter_model.safetensors`, with PEFT's
key names (`base_model.model.<HF module>.lora_A.weight` [rank, in], `.lora_B.weight` [out, rank]), so an
adapter tbjax trains loads with `peft.PeftModel.from_pretrained` onto the HF base, into SGLang's
`/load_lora_adapter`, and an adapter PEFT trained loads here.

The HF module of each adapted projection comes from the same layout table as the base weights
(tbjax.models.hf.layout), so the adapter's names can never disagree with the checkpoint's. Our A is
nnx.LoRA's [in, rank] and B [rank, out], each PEFT's transposed; the in and out dims flatten in HF's order.
A fused HF module (Gated DeltaNet's in_proj_qkv) is several projections here sharing one adapter, whose B
spans their rows in HF's order (tbjax.models.lora), so it is saved and loaded as the one module it is in HF.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import nnx
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from tbjax.models.hf.layout import hf_layouts
from tbjax.models.lora import AdapterPath, adapted_projections, adapter_of, add_adapters, targeted_projections
from tbjax.models.qwen import Qwen
from tbjax.sections.lora import LoraError, LoraSpec

CONFIG = "adapter_config.json"
WEIGHTS = "adapter_model.safetensors"
PREFIX = "base_model.model."


def _modules(model: Qwen, modules: frozenset[str] | None = None) -> dict[str, list[AdapterPath]]:
    """HF module name (model.layers.3.self_attn.q_proj) -> the paths of the projections it is here: one, or a
    fused module's parts (which share one adapter, tbjax.models.lora). For the HF modules named in `modules`
    (None: the adapted ones)."""
    layouts = hf_layouts(model.config)
    projections = adapted_projections(model) if modules is None else targeted_projections(model, modules)
    parts: dict[str, list[AdapterPath]] = {}
    for path in projections:
        name = str(layouts[(*path, "kernel")].names.item()).removesuffix(".weight")
        parts.setdefault(name, []).append(path)
    return parts


def module_shapes(model: Qwen, modules: frozenset[str]) -> dict[str, tuple[int, int]]:
    """HF module name -> (fan in, fan out) of its adapter, for the modules `modules` name."""
    projections = targeted_projections(model, modules)
    shapes = {}
    for name, paths in _modules(model, modules).items():
        kernels = [projections[path] for path in paths]
        fan_in = int(np.prod(kernels[0].kernel.shape[:kernels[0].in_rank]))
        shapes[name] = (fan_in, sum(int(np.prod(k.kernel.shape)) // fan_in for k in kernels))
    return shapes


def adapter_loras(model: Qwen) -> dict[str, nnx.LoRA]:
    """HF module name -> the nnx.LoRA holding its A and B (a fused module's parts share one)."""
    projections = adapted_projections(model)
    return {name: adapter_of(projections[paths[0]]).lora for name, paths in _modules(model).items()}


def save_adapter(model: Qwen, spec: LoraSpec, out: Path, base_model: str = "") -> Path:
    """Writes `model`'s adapters to `out` in PEFT's format (float32); returns `out`."""
    loras = adapter_loras(model)
    if not loras:
        raise LoraError("the model has no adapters to save (tbjax.models.lora.add_adapters)")
    tensors = {}
    for name, lora in loras.items():
        tensors[f"{PREFIX}{name}.lora_A.weight"] = np.ascontiguousarray(_local(lora.lora_a[...]).T)
        tensors[f"{PREFIX}{name}.lora_B.weight"] = np.ascontiguousarray(_local(lora.lora_b[...]).T)
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / WEIGHTS), metadata={"format": "pt"})
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": base_model,
              "r": spec.rank, "lora_alpha": spec.alpha, "lora_dropout": 0.0, "bias": "none",
              "target_modules": sorted({name.rsplit(".", 1)[-1] for name in loras}),
              "fan_in_fan_out": False, "use_rslora": False, "use_dora": False, "init_lora_weights": True,
              "modules_to_save": None, "inference_mode": True}
    (out / CONFIG).write_text(json.dumps(config, indent=2))
    return out


def _local(value: Any) -> np.ndarray:
    """An adapter tensor in this process's memory: adapters are replicated, so on a multi-host mesh any local
    shard is the whole tensor (np.asarray refuses an array that spans processes)."""
    if isinstance(value, jax.Array) and not value.is_fully_addressable:
        return np.asarray(value.addressable_data(0))
    return np.asarray(value)


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
    rank, alpha = config.get("r"), config.get("lora_alpha")
    if not isinstance(rank, int) or isinstance(rank, bool) or not isinstance(alpha, int | float) \
            or isinstance(alpha, bool):
        raise LoraError(f"{source}: r must be an integer and lora_alpha a number, got {rank!r} and {alpha!r}")
    return LoraSpec(rank=rank, alpha=float(alpha), targets=tuple(sorted(targets)))


def read_adapter(directory: Path) -> tuple[LoraSpec, dict[str, np.ndarray]]:
    """The spec and tensors (PEFT's names and layout) of the adapter saved at `directory`, checked for what
    tbjax computes the same way; LoraError naming the problem otherwise."""
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
    return _spec(config, directory / CONFIG), tensors


def adapter_values(model: Qwen, spec: LoraSpec, tensors: dict[str, np.ndarray],
                   source: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """PEFT's tensors as (A [in, rank], B [rank, out]) float32 by the HF module each adapts. Every tensor must
    name a module of `model` that `spec` targets and come with its partner, in the shapes `spec` gives."""
    shapes = module_shapes(model, spec.modules)
    for key in tensors:
        module = key.removeprefix(PREFIX).rsplit(".", 2)[0] if key.startswith(PREFIX) else None
        if module not in shapes or not key.endswith((".lora_A.weight", ".lora_B.weight")):
            raise LoraError(f"{source / WEIGHTS}: {key} names no projection of this model that "
                            f"target_modules {sorted(spec.modules)} adapt")
    values: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, (fan_in, fan_out) in shapes.items():
        a, b = (tensors.get(f"{PREFIX}{name}.{part}.weight") for part in ("lora_A", "lora_B"))
        if a is None and b is None:
            continue
        if a is None or b is None:
            raise LoraError(f"{source / WEIGHTS}: {name} has lora_{'A' if a is None else 'B'} missing")
        want_a, want_b = (spec.rank, fan_in), (fan_out, spec.rank)
        if a.shape != want_a or b.shape != want_b:
            raise LoraError(f"{name}: lora_A {a.shape} and lora_B {b.shape} where this model needs {want_a} and "
                            f"{want_b} (r={spec.rank})")
        values[name] = (a.T.astype(np.float32), b.T.astype(np.float32))
    if not values:
        raise LoraError(f"{source / WEIGHTS}: no adapter tensor for this model")
    return values


def load_adapter(model: Qwen, directory: Path) -> LoraSpec:
    """Adds the adapters saved in PEFT's format at `directory` to `model` (in place); returns their spec.
    Every adapted projection must find its A and B with the right shapes, and every tensor in the file must
    find its projection."""
    directory = Path(directory)
    spec, tensors = read_adapter(directory)
    values = adapter_values(model, spec, tensors, directory)
    missing = sorted(set(module_shapes(model, spec.modules)) - set(values))
    if missing:
        raise LoraError(f"{directory / WEIGHTS} has no adapter for {missing[0]}: the adapter does not cover this "
                        "model")
    add_adapters(model, spec)
    for name, lora in adapter_loras(model).items():
        lora.lora_a[...], lora.lora_b[...] = values[name]
    return spec
