"""Building blocks shared by every Qwen variant: parameters that carry logical axes, projections,
RMSNorm (plain, zero-centred and gated) and the SwiGLU MLP.

Every parameter records its logical axes (`logical_axes` metadata); `tbjax.parallel.sharding` turns those into
mesh shardings through one rules table, so no layer knows about meshes.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from tbjax.models.architecture import ModelConfig

INIT_STD = 0.02  # HF's initializer_range for Qwen


def make_param(
    rngs: nnx.Rngs | None, shape: Sequence[int], axes: Sequence[str | None], dtype: jnp.dtype, init: str
) -> nnx.Param:
    """A parameter of `shape` with one logical axis name per dimension; init is normal | ones | zeros."""
    if len(shape) != len(axes):
        raise ValueError(f"shape {tuple(shape)} and logical axes {tuple(axes)} differ in rank")
    if init == "normal":
        if rngs is None:
            raise ValueError(f"a randomly initialised parameter (logical axes {tuple(axes)}) needs rngs")
        value = INIT_STD * jax.random.normal(rngs.params(), tuple(shape), jnp.float32)
    elif init == "ones":
        value = jnp.ones(tuple(shape), jnp.float32)
    else:
        value = jnp.zeros(tuple(shape), jnp.float32)
    return nnx.Param(value.astype(dtype), logical_axes=tuple(axes))


class Projection(nnx.Module):
    """A linear map from `in_shape` dims to `out_shape` dims, e.g. [embed] -> [heads, head_dim].

    Stored as kernel[*in_shape, *out_shape] so that heads stay a real axis (shardable, readable einsums).
    """

    def __init__(
        self,
        in_shape: tuple[int, ...],
        out_shape: tuple[int, ...],
        in_axes: tuple[str | None, ...],
        out_axes: tuple[str | None, ...],
        *,
        use_bias: bool,
        cfg: ModelConfig,
        rngs: nnx.Rngs | None,
    ):
        self.in_rank = len(in_shape)
        self.compute_dtype = cfg.compute_dtype
        self.kernel = make_param(rngs, in_shape + out_shape, in_axes + out_axes, cfg.param_dtype, "normal")
        self.bias = make_param(rngs, out_shape, out_axes, cfg.param_dtype, "zeros") if use_bias else None
        self.adapter: nnx.Module | None = nnx.data(None)  # a LoRA update (tbjax.models.lora), added later

    def __call__(self, x: jax.Array) -> jax.Array:
        """x: [..., *in_shape] -> [..., *out_shape] in the compute dtype."""
        kernel = self.kernel[...].astype(self.compute_dtype)
        y = flat_dot(x.astype(self.compute_dtype), kernel, self.in_rank)
        if self.bias is not None:
            y = y + self.bias[...].astype(self.compute_dtype)
        if self.adapter is not None:
            y = y + self.adapter(x.astype(self.compute_dtype))
        return y


def flat_dot(x: jax.Array, kernel: jax.Array, in_rank: int) -> jax.Array:
    """x [..., *in] . kernel [*in, *out] -> [..., *out], with x's leading dims flattened into one. The
    gradient of a dot that contracts over several leading (batch, seq) dims made XLA's CPU backend transpose
    a fused activation gradient element by element and run the weight gradient outside XNNPACK; flat, the
    forward+backward is faster (scripts/bench/model_forward_backward.py measures it, scripts/bench/README.md
    holds the figures)."""
    lead = x.shape[:x.ndim - in_rank]
    flat = x.reshape(-1, *x.shape[x.ndim - in_rank:])
    contract = tuple(range(1, 1 + in_rank))
    y = jax.lax.dot_general(flat, kernel, ((contract, tuple(range(in_rank))), ((), ())))
    return y.reshape(*lead, *y.shape[1:])


class RMSNorm(nnx.Module):
    """Root-mean-square norm computed in float32. Qwen2/3 scale in the input dtype by `weight` (init 1);
    Qwen3.5 (`norm_zero_centered`) scales in float32 by 1 + `weight` (init 0), so weight decay pulls the
    scale towards 1 rather than 0."""

    def __init__(self, size: int, cfg: ModelConfig, rngs: nnx.Rngs | None = None):
        self.eps = cfg.rms_norm_eps
        self.zero_centered = cfg.norm_zero_centered
        init = "zeros" if self.zero_centered else "ones"
        self.weight = make_param(rngs, (size,), ("norm",), cfg.param_dtype, init)

    def __call__(self, x: jax.Array) -> jax.Array:
        normed = _rms_normalise(x, self.eps)
        if self.zero_centered:
            return (normed * (1.0 + self.weight[...].astype(jnp.float32))).astype(x.dtype)
        return self.weight[...].astype(x.dtype) * normed.astype(x.dtype)


class GatedRMSNorm(nnx.Module):
    """Gated DeltaNet's output norm: RMSNorm scaled by `weight` (init 1, whatever the model's other norms
    do), then multiplied by silu(gate) in float32."""

    def __init__(self, size: int, cfg: ModelConfig, rngs: nnx.Rngs | None = None):
        self.eps = cfg.rms_norm_eps
        self.weight = make_param(rngs, (size,), ("norm",), cfg.param_dtype, "ones")

    def __call__(self, x: jax.Array, gate: jax.Array) -> jax.Array:
        """x, gate: [..., size] -> [..., size] in x's dtype."""
        scaled = self.weight[...].astype(x.dtype) * _rms_normalise(x, self.eps).astype(x.dtype)
        return (scaled.astype(jnp.float32) * jax.nn.silu(gate.astype(jnp.float32))).astype(x.dtype)


def _rms_normalise(x: jax.Array, eps: float) -> jax.Array:
    """x / rms(x) over the last axis, in float32."""
    x32 = x.astype(jnp.float32)
    return x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)


class MLP(nnx.Module):
    """SwiGLU feed-forward: down(silu(gate(x)) * up(x))."""

    def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs | None):
        d, f = (cfg.hidden_size,), (cfg.intermediate_size,)
        self.gate_proj = Projection(d, f, ("embed",), ("mlp",), use_bias=False, cfg=cfg, rngs=rngs)
        self.up_proj = Projection(d, f, ("embed",), ("mlp",), use_bias=False, cfg=cfg, rngs=rngs)
        self.down_proj = Projection(f, d, ("mlp",), ("embed",), use_bias=False, cfg=cfg, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.down_proj(jax.nn.silu(self.gate_proj(x)) * self.up_proj(x))

