"""Qwen3-MoE sparse feed-forward: a softmax router picks the top-k experts per token (optionally
renormalising their weights), each expert is a SwiGLU MLP, and there is no shared expert.

Tokens are sorted by expert and multiplied with `jax.lax.ragged_dot`, so compute follows the k chosen
experts (no dense all-experts pass and no capacity-based token dropping).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from tbjax.models.architecture import ModelConfig
from tbjax.models.layers import Projection, make_param


class Experts(nnx.Module):
    """The stacked expert weights: gate/up [experts, embed, expert_mlp], down [experts, expert_mlp, embed]."""

    def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs | None):
        e, d, f = cfg.num_experts, cfg.hidden_size, cfg.moe_intermediate_size
        dtype = cfg.param_dtype
        self.compute_dtype = cfg.compute_dtype
        self.gate_proj = make_param(rngs, (e, d, f), ("experts", "embed", "expert_mlp"), dtype, "normal")
        self.up_proj = make_param(rngs, (e, d, f), ("experts", "embed", "expert_mlp"), dtype, "normal")
        self.down_proj = make_param(rngs, (e, f, d), ("experts", "expert_mlp", "embed"), dtype, "normal")

    def __call__(self, tokens: jax.Array, group_sizes: jax.Array) -> jax.Array:
        """tokens: [n, embed] sorted by expert; group_sizes: [experts] int32 -> [n, embed]."""
        cast = lambda p: p[...].astype(self.compute_dtype)  # noqa: E731
        gate = jax.lax.ragged_dot(tokens, cast(self.gate_proj), group_sizes)
        up = jax.lax.ragged_dot(tokens, cast(self.up_proj), group_sizes)
        return jax.lax.ragged_dot(jax.nn.silu(gate) * up, cast(self.down_proj), group_sizes)


class SparseMoE(nnx.Module):
    def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs | None):
        self.top_k = cfg.num_experts_per_tok
        self.num_experts = cfg.num_experts
        self.norm_topk_prob = cfg.norm_topk_prob
        self.gate = Projection((cfg.hidden_size,), (cfg.num_experts,), ("embed",), ("router",),
                               use_bias=False, cfg=cfg, rngs=rngs)
        self.experts = Experts(cfg, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        """x: [batch, seq, embed] -> [batch, seq, embed]."""
        b, s, d = x.shape
        tokens = x.reshape(b * s, d).astype(self.experts.compute_dtype)
        router_logits = self.gate(tokens)
        probs = jax.nn.softmax(router_logits.astype(jnp.float32), axis=-1)
        weights, chosen = jax.lax.top_k(probs, self.top_k)
        if self.norm_topk_prob:
            weights = weights / jnp.sum(weights, axis=-1, keepdims=True)
        weights = weights.astype(router_logits.dtype)

        flat_expert = chosen.reshape(-1)  # [tokens * k], token-major
        order = jnp.argsort(flat_expert, stable=True)
        group_sizes = jnp.bincount(flat_expert, length=self.num_experts).astype(jnp.int32)
        sorted_tokens = tokens[order // self.top_k]
        expert_out = self.experts(sorted_tokens, group_sizes)
        unsorted = jnp.zeros_like(expert_out).at[order].set(expert_out).reshape(b * s, self.top_k, d)
        combined = jnp.einsum("tkd,tk->td", unsorted, weights.astype(unsorted.dtype))
        return combined.reshape(b, s, d)
