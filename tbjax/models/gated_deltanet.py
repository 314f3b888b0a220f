"""Gated DeltaNet, the linear-attention token mixer of Qwen3.5/3.6 hybrids (3 of every 4 layers).

x -> q, k (key heads), v, z (value heads), b, a (one per value head); q, k, v each pass a causal short conv
and silu; q and k are L2-normalised (q also scaled by key_dim^-1/2); beta = sigmoid(b) is the write
strength and g = -exp(A_log) * softplus(a + dt_bias) <= 0 the log decay. The gated delta rule
(`tbjax.models.delta_rule`) mixes tokens; each key head serves a contiguous group of value heads. The
output is RMSNorm(o) * silu(z), projected back to the hidden size.

The same parameters serve training (chunked form, any length), prefill from a carried state and single
token decoding (recurrent step); `LinearState` is what a decoder carries per sequence for one layer.
Projections, convs and the norm run in the compute dtype; the recurrence runs in float32.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from tbjax.models.architecture import ModelConfig
from tbjax.models.delta_rule import chunked_gated_delta, document_index, gated_delta_step
from tbjax.models.layers import GatedRMSNorm, Projection, make_param
from tbjax.models.short_conv import causal_conv

L2_EPS = 1e-6


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class LinearState:
    """One Gated DeltaNet layer's decode state for `batch` sequences."""

    recurrent: jax.Array  # [batch, value_heads, key_dim, value_dim] float32
    conv_q: jax.Array  # [batch, kernel - 1, key_heads, key_dim]: the last inputs of each short conv
    conv_k: jax.Array
    conv_v: jax.Array  # [batch, kernel - 1, value_heads, value_dim]

    @classmethod
    def zeros(cls, cfg: ModelConfig, batch: int, leading: tuple[int, ...] = ()) -> LinearState:
        """A fresh state; `leading` prepends axes (e.g. (linear_layers,) for a whole model's cache)."""
        nk, nv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
        dk, dv, width = cfg.linear_key_head_dim, cfg.linear_value_head_dim, cfg.linear_conv_kernel - 1
        conv = lambda heads, dim: jnp.zeros((*leading, batch, width, heads, dim), cfg.compute_dtype)  # noqa: E731
        return cls(jnp.zeros((*leading, batch, nv, dk, dv), jnp.float32), conv(nk, dk), conv(nk, dk), conv(nv, dv))


class GatedDeltaNet(nnx.Module):
    def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs | None):
        d, dtype = cfg.hidden_size, cfg.param_dtype
        nk, nv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
        dk, dv = cfg.linear_key_head_dim, cfg.linear_value_head_dim
        self.chunk_size = cfg.runtime.linear_chunk_size
        self.chunks_per_step = cfg.runtime.linear_chunks_per_step
        self.compute_dtype = cfg.compute_dtype

        def proj(heads: int, dim: int | None, axis: str) -> Projection:
            shape, axes = ((heads, dim), (axis, "head_dim")) if dim else ((heads,), (axis,))
            return Projection((d,), shape, ("embed",), axes, use_bias=False, cfg=cfg, rngs=rngs)

        self.in_proj_q = proj(nk, dk, "linear_k_heads")
        self.in_proj_k = proj(nk, dk, "linear_k_heads")
        self.in_proj_v = proj(nv, dv, "linear_v_heads")
        self.in_proj_z = proj(nv, dv, "linear_v_heads")
        self.in_proj_b = proj(nv, None, "linear_v_heads")
        self.in_proj_a = proj(nv, None, "linear_v_heads")
        kernel = cfg.linear_conv_kernel
        self.conv_q = make_param(rngs, (kernel, nk, dk), ("conv_kernel", "linear_k_heads", "head_dim"), dtype, "normal")
        self.conv_k = make_param(rngs, (kernel, nk, dk), ("conv_kernel", "linear_k_heads", "head_dim"), dtype, "normal")
        self.conv_v = make_param(rngs, (kernel, nv, dv), ("conv_kernel", "linear_v_heads", "head_dim"), dtype, "normal")
        self.dt_bias = make_param(rngs, (nv,), ("linear_v_heads",), dtype, "ones")
        self.A_log = make_param(rngs, (nv,), ("linear_v_heads",), dtype, "zeros")
        self.norm = GatedRMSNorm(dv, cfg, rngs)
        self.out_proj = Projection((nv, dv), (d,), ("linear_v_heads", "head_dim"), ("embed",), use_bias=False,
                                   cfg=cfg, rngs=rngs)

    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, segments: jax.Array) -> jax.Array:
        """The training form, with attention's signature (rotary tables unused): x [batch, seq, embed],
        segments [batch, seq] -> [batch, seq, embed]. The state starts at zero and resets per document."""
        del cos, sin
        return self.mix(x, document_index(segments))[0]

    def mix(self, x: jax.Array, docs: jax.Array, state: LinearState | None = None,
            ends: jax.Array | None = None) -> tuple[jax.Array, LinearState]:
        """x [batch, seq, embed], docs [batch, seq] document counter, state carried in (None: zeros), ends
        [batch] last real token per row (None: all real; tokens after it leave the state untouched) ->
        (output [batch, seq, embed], state after each row's last real token). One token with a state runs
        the recurrent step; anything else the chunked form."""
        t = x.shape[1]
        conv_in = (None, None, None) if state is None else (state.conv_q, state.conv_k, state.conv_v)
        convolved = [causal_conv(proj(x), weight[...], docs, s, ends) for proj, weight, s in zip(
            (self.in_proj_q, self.in_proj_k, self.in_proj_v), (self.conv_q, self.conv_k, self.conv_v), conv_in,
            strict=True)]
        (q, conv_q), (k, conv_k), (v, conv_v) = ((jax.nn.silu(y), s) for y, s in convolved)
        q = _l2_normalise(q) * q.shape[-1] ** -0.5
        k = _l2_normalise(k)
        beta = jax.nn.sigmoid(self.in_proj_b(x).astype(jnp.float32))
        a = self.in_proj_a(x).astype(jnp.float32) + self.dt_bias[...].astype(jnp.float32)
        g = -jnp.exp(self.A_log[...].astype(jnp.float32)) * jax.nn.softplus(a)
        if ends is not None:  # bucket padding: no decay and no write, so the state passes through
            real = (jnp.arange(t)[None, :] <= ends[:, None])[..., None]
            g, beta = jnp.where(real, g, 0.0), jnp.where(real, beta, 0.0)
        groups = v.shape[2] // q.shape[2]
        q, k = jnp.repeat(q, groups, axis=2), jnp.repeat(k, groups, axis=2)
        recurrent = None if state is None else state.recurrent
        if t == 1 and recurrent is not None:
            out, recurrent = gated_delta_step(q[:, 0], k[:, 0], v[:, 0], g[:, 0], beta[:, 0], recurrent)
            out = out[:, None]
        else:
            out, recurrent = chunked_gated_delta(q, k, v, g, beta, docs, recurrent, self.chunk_size,
                                                 self.chunks_per_step)
        z = self.in_proj_z(x)
        out = self.norm(out.astype(z.dtype), z)
        return self.out_proj(out), LinearState(recurrent, conv_q, conv_k, conv_v)


def _l2_normalise(x: jax.Array) -> jax.Array:
    """x / ||x|| over the last axis, in float32 (as the reference kernels do)."""
    x = x.astype(jnp.float32)
    return x * jax.lax.rsqrt(jnp.sum(x * x, axis=-1, keepdims=True) + L2_EPS)
