"""LoRA adapters on a Qwen's projections: y = x W + (alpha / rank) * x A B, with A [in, rank] and B [rank, out]
held in flax's own `nnx.LoRA` (its parameters are `nnx.LoRAParam`, so the trainer can take gradients and
moments of the adapters alone and leave the base frozen in its dtype).

B starts at zero, so a freshly adapted model is the base policy exactly; A starts random (nnx.LoRA's
variance-scaling initialiser), or both come from a saved adapter (tbjax.models.hf.peft_adapter).

Targets are HF module names (the last part: q_proj, up_proj, in_proj_qkv, ...) or a profile: `attention_mlp`
covers attention and the dense MLP; `all_linear` adds the Gated DeltaNet projections of the Qwen3.5 hybrids.
A hybrid must adapt its GDN layers too (three of every four layers would otherwise train nothing), so a
hybrid under `attention_mlp` is refused. HF fuses GDN's q, k and v into one `in_proj_qkv`, which PEFT adapts
with one A and one B over the fused rows; here q, k and v are separate projections (each sharded by its own
heads), so their adapters share one `nnx.LoRA` and each takes its rows' columns of B: the same update as
PEFT's. MoE experts are stacked tensors, not projections, and are never adapted (nor is the router); their
layers' attention is. A target list that wraps nothing is refused rather than training nothing.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

import jax
import jax.numpy as jnp
from flax import nnx

from tbjax.models.layers import Projection
from tbjax.models.qwen import Qwen
from tbjax.sections.lora import GATED_DELTANET, LoraError, LoraSpec

AdapterPath = tuple[str | int, ...]  # of the adapted Projection inside the model
# HF modules that are several projections here, in HF's row order: one adapter spans them
FUSED_MODULES = {"in_proj_qkv": ("in_proj_q", "in_proj_k", "in_proj_v")}


def _out_size(projection: Projection) -> int:
    return math.prod(projection.kernel.shape[projection.in_rank:])


class Adapter(nnx.Module):
    """The low-rank update of one Projection: [..., *in_shape] -> [..., *out_shape], scaled. `lora` maps the
    flattened input to `columns` [start, stop) of its output: all of it, or one projection's rows of a fused
    HF module's adapter."""

    def __init__(self, projection: Projection, lora: nnx.LoRA, columns: tuple[int, int], scale: float):
        self.out_shape = tuple(projection.kernel.shape[projection.in_rank:])
        self.in_rank = projection.in_rank
        self.lora, self.columns, self.scale = lora, columns, scale

    def __call__(self, x: jax.Array) -> jax.Array:
        flat = x.reshape(*x.shape[:x.ndim - self.in_rank], -1).astype(jnp.float32)
        start, stop = self.columns
        update = flat @ self.lora.lora_a[...] @ self.lora.lora_b[...][:, start:stop] * self.scale
        return update.reshape(*update.shape[:-1], *self.out_shape).astype(x.dtype)

    def delta(self) -> jax.Array:
        """scale * A B over this projection's columns, shaped like its kernel [*in_shape, *out_shape]."""
        start, stop = self.columns
        return self.lora.lora_a[...] @ self.lora.lora_b[...][:, start:stop] * self.scale


def _new_lora(fan_in: int, fan_out: int, spec: LoraSpec, rngs: nnx.Rngs) -> nnx.LoRA:
    # replicated on every device (rank 16 of a 27B's projections is ~0.1% of its weights): no logical axes
    replicated = {"logical_axes": (None, None)}
    return nnx.LoRA(fan_in, spec.rank, fan_out, param_dtype=jnp.float32, rngs=rngs, a_metadata=replicated,
                    b_metadata=replicated)


def _adapter_path(path: tuple[Hashable, ...]) -> AdapterPath:
    """A projection's path from nnx.iter_graph: attribute names and list indices."""
    parts = tuple(part for part in path if isinstance(part, str | int))
    if len(parts) != len(path):
        raise TypeError(f"nnx path {path} has a part that is neither an attribute name nor a list index")
    return parts


def adapted_projections(model: Qwen) -> dict[AdapterPath, Projection]:
    """Every adapted projection of `model`, by path."""
    return {_adapter_path(path): node for path, node in nnx.iter_graph(model)
            if isinstance(node, Projection) and node.adapter is not None}


def targeted_projections(model: Qwen, modules: frozenset[str]) -> dict[AdapterPath, Projection]:
    """The projections of `model` that the HF modules `modules` are, by path."""
    names = {part for module in modules for part in FUSED_MODULES.get(module, (module,))}
    return {_adapter_path(path): node for path, node in nnx.iter_graph(model)
            if isinstance(node, Projection) and path and path[-1] in names}


def adapter_of(projection: Projection) -> Adapter:
    """The adapter of an adapted projection (one of `adapted_projections`)."""
    if not isinstance(projection.adapter, Adapter):
        raise LoraError(f"the projection has no LoRA adapter (tbjax.models.lora.add_adapters adds them), "
                        f"its adapter is {projection.adapter!r}")
    return projection.adapter


def add_adapters(model: Qwen, spec: LoraSpec, seed: int = 0) -> list[AdapterPath]:
    """Wraps every targeted projection of `model` (in place) and returns their paths. B = 0: the model's output
    is unchanged until the adapters train."""
    if model.config.runtime.scan_layers:
        raise LoraError("LoRA needs model.scan_layers: false for now (adapters of a scanned stack are not "
                        "stacked yet)")
    hybrid = any(model.config.is_linear_layer(i) for i in range(model.config.num_layers))
    if hybrid and not spec.modules & set(GATED_DELTANET):
        raise LoraError(f"lora targets {list(spec.targets)} adapt no Gated DeltaNet projection, so this hybrid's "
                        f"linear layers would train nothing: use lora.targets=[all_linear] or add some of "
                        f"{list(GATED_DELTANET)}")
    targets = targeted_projections(model, spec.modules)
    if not targets:
        raise LoraError(f"lora targets {list(spec.targets)} wrap no projection of this model; its projections "
                        f"are {sorted({p[-1] for p, n in nnx.iter_graph(model) if isinstance(n, Projection)})}")
    rngs = nnx.Rngs(params=seed)
    for group in _fused_groups(targets):
        projections = [targets[path] for path in group]
        lora = _new_lora(math.prod(projections[0].kernel.shape[:projections[0].in_rank]),
                         sum(map(_out_size, projections)), spec, rngs)
        start = 0
        for projection in projections:
            projection.adapter = Adapter(projection, lora, (start, start + _out_size(projection)), spec.scale)
            start += _out_size(projection)
    model.lora_spec = spec  # what a copy of the model needs to carry the same adapters
    return list(targets)


def adapters_spec(model: Qwen) -> LoraSpec:
    """The spec of the adapters `add_adapters` gave `model` (what a copy, a publish or an export of it carries);
    an error where it has none."""
    if model.lora_spec is None:
        raise LoraError("the model carries no LoRA adapters, so no LoraSpec to copy or publish them by "
                        "(tbjax.models.lora.add_adapters adds them and records it)")
    return model.lora_spec


def _fused_groups(targets: dict[AdapterPath, Projection]) -> list[list[AdapterPath]]:
    """The targeted paths grouped by the adapter they share: a fused HF module's parts together in its row
    order, every other projection alone."""
    part_of = {part: module for module, parts in FUSED_MODULES.items() for part in parts}
    groups: dict[AdapterPath, list[AdapterPath]] = {}
    for path in targets:
        key = (*path[:-1], part_of[path[-1]]) if path[-1] in part_of else path
        groups.setdefault(key, []).append(path)
    order: dict[str | int, int] = {part: i for parts in FUSED_MODULES.values() for i, part in enumerate(parts)}
    return [sorted(group, key=lambda path: order.get(path[-1], 0)) for group in groups.values()]


def merge_adapters(model: Qwen) -> None:
    """Folds every adapter into its projection's kernel (W + scale * A B) and removes it: the merged model
    computes what the adapted one did, with no adapter left to serve."""
    for projection in adapted_projections(model).values():
        kernel = projection.kernel[...]
        delta = adapter_of(projection).delta().reshape(kernel.shape)
        projection.kernel[...] = (kernel.astype(jnp.float32) + delta).astype(kernel.dtype)
        projection.adapter = None
    model.lora_spec = None
