"""Grouped-query self-attention of Qwen2/Qwen3/Qwen3.5: optional q/k/v bias (Qwen2), per-head q/k RMSNorm
(Qwen3, 3.5), rotary embeddings (partial in Qwen3.5), an optional sigmoid gate on the output (Qwen3.5: the
query projection also yields one gate value per head and dim), and a pluggable kernel."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import AbstractMesh, Mesh

from tbjax.models.architecture import ModelConfig
from tbjax.models.attention_kernels import attend
from tbjax.models.layers import Projection, RMSNorm
from tbjax.models.rope import apply_rotary
from tbjax.parallel.sharding import ShardingRules
from tbjax.sections.model import AttentionImpl


class Attention(nnx.Module):
    def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs | None, mesh: Mesh | AbstractMesh | None = None,
                 rules: ShardingRules | None = None):
        d, hd = cfg.hidden_size, cfg.head_dim
        bias = cfg.qkv_bias
        self.impl: AttentionImpl = cfg.runtime.attention_impl
        self.mesh, self.rules = mesh, rules
        self.gated = cfg.attn_output_gate
        # gated: each head's projection is [query | gate], as in the HF tensor, so heads stay contiguous
        q_width = 2 * hd if self.gated else hd
        self.q_proj = Projection((d,), (cfg.num_heads, q_width), ("embed",), ("q_heads", "head_dim"),
                                 use_bias=bias, cfg=cfg, rngs=rngs)
        self.k_proj = Projection((d,), (cfg.num_kv_heads, hd), ("embed",), ("kv_heads", "head_dim"),
                                 use_bias=bias, cfg=cfg, rngs=rngs)
        self.v_proj = Projection((d,), (cfg.num_kv_heads, hd), ("embed",), ("kv_heads", "head_dim"),
                                 use_bias=bias, cfg=cfg, rngs=rngs)
        self.o_proj = Projection((cfg.num_heads, hd), (d,), ("q_heads", "head_dim"), ("embed",),
                                 use_bias=False, cfg=cfg, rngs=rngs)
        self.q_norm = RMSNorm(hd, cfg, rngs) if cfg.qk_norm else None
        self.k_norm = RMSNorm(hd, cfg, rngs) if cfg.qk_norm else None

    def qkv(self, x: jax.Array, cos: jax.Array, sin: jax.Array
            ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array | None]:
        """x: [batch, seq, embed] -> rotated q [batch, seq, heads, head_dim], rotated k and v [.., kv_heads, ..],
        and the output gate's logits [batch, seq, heads, head_dim] (None when the model has no gate)."""
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        gate = None
        if self.gated:
            q, gate = jnp.split(q, 2, axis=-1)
        if self.q_norm is not None and self.k_norm is not None:  # both or neither (cfg.qk_norm)
            q, k = self.q_norm(q), self.k_norm(k)
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin), v, gate

    def output(self, attended: jax.Array, gate: jax.Array | None) -> jax.Array:
        """attended: [batch, seq, heads, head_dim] -> [batch, seq, embed], gated when the model gates."""
        if gate is not None:
            attended = attended * jax.nn.sigmoid(gate)
        return self.o_proj(attended)

    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array, segments: jax.Array) -> jax.Array:
        """x: [batch, seq, embed]; cos/sin: [batch, seq, rotary_dim]; segments: [batch, seq] int32."""
        q, k, v, gate = self.qkv(x, cos, sin)
        return self.output(attend(self.impl, q, k, v, segments, mesh=self.mesh, rules=self.rules), gate)
