"""LoRA adapters on a Qwen's projections: y = x W + (alpha / rank) * x A B, with A [in, rank] and B [rank, out]
held in flax's own `nnx.LoRA` (its parameters are `nnx.LoRAParam`, so the trainer can take gradients and
moments of the adapters alone and leave the base frozen in its dtype).

B starts at zero, so a freshly adapted model is the base policy exactly; A starts random (nnx.LoRA's
variance-scaling initialiser), or both come from a saved adapter (tbjax.models.hf.peft_adapter).

Targets are projection names (the HF module names' last part: q_proj, up_proj, in_proj_z, ...) or a profile:
`attention_mlp` covers attention and the dense MLP; `all_linear` adds the Gated DeltaNet projections of the
Qwen3.5 hybrids (refused for now, as is a hybrid whose GDN layers would train no adapter). MoE experts are
stacked tensors, not projections, and are never adapted (nor is the router); their layers' attention is. A
target list that wraps nothing is refused rather than training nothing.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from tbjax.models.layers import Projection
from tbjax.models.qwen import Qwen
from tbjax.sections.lora import LoraError, LoraSpec

AdapterPath = tuple[str | int, ...]  # of the adapted Projection inside the model


class Adapter(nnx.Module):
    """The low-rank update of one Projection: [..., *in_shape] -> [..., *out_shape], scaled."""

    def __init__(self, projection: Projection, spec: LoraSpec, rngs: nnx.Rngs):
        in_shape = projection.kernel.shape[:projection.in_rank]
        self.out_shape = tuple(projection.kernel.shape[projection.in_rank:])
        self.in_rank = projection.in_rank
        self.scale = spec.scale
        # replicated on every device (rank 16 of a 27B's projections is ~0.1% of its weights): no logical axes
        replicated = {"logical_axes": (None, None)}
        self.lora = nnx.LoRA(math.prod(in_shape), spec.rank, math.prod(self.out_shape), param_dtype=jnp.float32,
                             rngs=rngs, a_metadata=replicated, b_metadata=replicated)

    def __call__(self, x: jax.Array) -> jax.Array:
        flat = x.reshape(*x.shape[:x.ndim - self.in_rank], -1)
        update = self.lora(flat.astype(jnp.float32)) * self.scale
        return update.reshape(*update.shape[:-1], *self.out_shape).astype(x.dtype)


def adapted_projections(model: Qwen) -> dict[AdapterPath, Projection]:
    """Every adapted projection of `model`, by path."""
    return {tuple(path): node for path, node in nnx.iter_graph(model)
            if isinstance(node, Projection) and node.adapter is not None}


def targeted_projections(model: Qwen, modules: frozenset[str]) -> dict[AdapterPath, Projection]:
    """The projections of `model` whose names are in `modules`, by path."""
    return {tuple(path): node for path, node in nnx.iter_graph(model)
            if isinstance(node, Projection) and path and path[-1] in modules}


def add_adapters(model: Qwen, spec: LoraSpec, seed: int = 0) -> list[AdapterPath]:
    """Wraps every targeted projection of `model` (in place) and returns their paths. B = 0: the model's output
    is unchanged until the adapters train."""
    if model.config.runtime.scan_layers:
        raise LoraError("LoRA needs model.scan_layers: false for now (adapters of a scanned stack are not "
                        "stacked yet)")
    if any(model.config.is_linear_layer(i) for i in range(model.config.num_layers)):
        raise LoraError("LoRA on Qwen3.5 hybrids is not supported yet: their Gated DeltaNet layers must train "
                        "adapters too, and HF fuses q, k and v into one in_proj_qkv whose adapter shares one A")
    targets = targeted_projections(model, spec.modules)
    if not targets:
        raise LoraError(f"lora targets {list(spec.targets)} wrap no projection of this model; its projections "
                        f"are {sorted({p[-1] for p, n in nnx.iter_graph(model) if isinstance(n, Projection)})}")
    rngs = nnx.Rngs(params=seed)
    for projection in targets.values():
        projection.adapter = Adapter(projection, spec, rngs)
    model.lora_spec = spec  # what a copy of the model needs to carry the same adapters
    return list(targets)


def merge_adapters(model: Qwen) -> None:
    """Folds every adapter into its projection's kernel (W + scale * A B) and removes it: the merged model
    computes what the adapted one did, with no adapter left to serve."""
    for projection in adapted_projections(model).values():
        adapter = projection.adapter
        delta = adapter.lora.lora_a[...] @ adapter.lora.lora_b[...] * adapter.scale
        kernel = projection.kernel[...]
        projection.kernel[...] = (kernel.astype(jnp.float32) + delta.reshape(kernel.shape)).astype(kernel.dtype)
        projection.adapter = None
    model.lora_spec = None
