"""Incremental decoding with a KV cache: the forward pass the inference engine runs.

The cache holds every full-attention layer's keys and values for a fixed number of slots (one per
concurrent sequence): k, v: [attention_layers, slots, max_len, kv_heads, head_dim]. One function serves
prefill and decode: it takes `tokens` [rows, t] for cache rows `slots` [rows] starting at absolute positions
`starts` [rows], writes their keys/values into the cache and attends to everything the slot holds up to each
query's position. Prefill is rows=1..n with t = a padded prompt bucket; a decode step is rows=slots with
t=1. Attention reads only the first `kv_len` cache positions (a static bucket), so short sequences do not
pay for max_len.

A hybrid model's Gated DeltaNet layers keep, beside it, one `LinearState` per slot (recurrent state and
short-conv inputs, [linear_layers, slots, ...]): the state after everything the slot has consumed. So a
row either starts a sequence (starts == 0, the state is reset) or continues exactly where its slot stopped;
unlike keys and values, the state cannot be rewound to a shorter prefix.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from tbjax.models.architecture import ModelConfig
from tbjax.models.attention_kernels import xla_attention
from tbjax.models.gated_deltanet import LinearState
from tbjax.models.qwen import DecoderBlock, Qwen


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class KVCache:
    k: jax.Array  # [attention_layers, slots, max_len, kv_heads, head_dim]
    v: jax.Array
    linear: LinearState | None = None  # hybrid models: [linear_layers, slots, ...]

    @classmethod
    def zeros(cls, cfg: ModelConfig, slots: int, max_len: int) -> KVCache:
        shape = (len(cfg.full_attention_layers), slots, max_len, cfg.num_kv_heads, cfg.head_dim)
        linear = LinearState.zeros(cfg, slots, (len(cfg.linear_layers),)) if cfg.linear_layers else None
        return cls(jnp.zeros(shape, cfg.compute_dtype), jnp.zeros(shape, cfg.compute_dtype), linear)

    @property
    def max_len(self) -> int:
        return self.k.shape[2]

    @property
    def slots(self) -> int:
        return self.k.shape[1]


def _attend_cached(block: DecoderBlock, x: jax.Array, cos: jax.Array, sin: jax.Array, k_cache: jax.Array,
                   v_cache: jax.Array, layer: tuple[int, ...], slots: jax.Array, starts: jax.Array, kv_len: int
                   ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One block with its layer's cache: k_cache[layer] is [slots, max_len, kv_heads, head_dim]. `layer` is
    (j,) for the stacked cache of every layer, () for one layer's. Writing into the stack by index, rather
    than slicing a layer out and setting it back, lets XLA update the donated buffer in place: the slice
    round trip copied the whole cache at every decode step (half of a tiny model's step)."""
    attn = block.self_attn
    q, k, v, gate = attn.qkv(block.input_layernorm(x), cos, sin)
    t = x.shape[1]
    positions = starts[:, None] + jnp.arange(t)[None, :]  # [rows, t]
    k_cache = k_cache.at[(*layer, slots[:, None], positions)].set(k.astype(k_cache.dtype))
    v_cache = v_cache.at[(*layer, slots[:, None], positions)].set(v.astype(v_cache.dtype))
    keys, values = k_cache[layer][slots, :kv_len], v_cache[layer][slots, :kv_len]
    # positions past the row's last are masked, but a masked NaN (left by weights since swapped out) would
    # still reach the output as 0 x NaN: they are zeroed, so only what this sequence wrote is ever read
    written = (jnp.arange(kv_len)[None, :] <= positions[:, -1:])[:, :, None, None]  # [rows, kv_len, 1, 1]
    keys, values = jnp.where(written, keys, 0), jnp.where(written, values, 0)
    mask = (jnp.arange(kv_len)[None, None, :] <= positions[:, :, None])[:, None]  # [rows, 1, t, kv_len]
    out = attn.output(xla_attention(q, keys.astype(q.dtype), values.astype(q.dtype), mask), gate)
    return block.finish(x, out), k_cache, v_cache


def _mix_cached(block: DecoderBlock, x: jax.Array, layer_state: LinearState, slots: jax.Array, starts: jax.Array,
                ends: jax.Array) -> tuple[jax.Array, LinearState]:
    """One Gated DeltaNet block with its layer's state [slots, ...]: rows starting a sequence start from zeros,
    tokens after a row's `ends` leave its state as it was."""
    fresh = starts == 0

    def rows(a: jax.Array) -> jax.Array:
        picked = a[slots]
        return jnp.where(fresh.reshape(-1, *(1,) * (picked.ndim - 1)), 0, picked)

    docs = jnp.zeros(x.shape[:2], jnp.int32)  # one sequence per row
    out, new = block.linear_attn.mix(block.input_layernorm(x), docs, jax.tree.map(rows, layer_state), ends)
    layer_state = jax.tree.map(lambda a, n: a.at[slots].set(n.astype(a.dtype)), layer_state, new)
    return block.finish(x, out), layer_state


def _layer(stacked: LinearState, j: int) -> LinearState:
    return jax.tree.map(lambda a: a[j], stacked)


def _set_layer(stacked: LinearState, j: int, layer_state: LinearState) -> LinearState:
    return jax.tree.map(lambda a, n: a.at[j].set(n), stacked, layer_state)


def forward_cached(model: Qwen, cache: KVCache, tokens: jax.Array, slots: jax.Array, starts: jax.Array,
                   last_index: jax.Array, kv_len: int, lengths: jax.Array | None = None) -> tuple[jax.Array, KVCache]:
    """tokens [rows, t] int32 -> (logits at `last_index` per row [rows, vocab] float32, updated cache).

    Padding beyond a row's real tokens writes cache entries past its length, which later writes overwrite
    and the causal mask never shows, so buckets need no extra masking. Linear layers need to know which
    tokens are real: `lengths` [rows] (default last_index + 1); a row of length 0 (an idle slot in a decode
    step) leaves its slot's linear state untouched.
    """
    cfg = model.config
    positions = starts[:, None] + jnp.arange(tokens.shape[1])[None, :]
    cos, sin = model.rotary.cos_sin(positions)
    x = model.embed_tokens[...].astype(cfg.compute_dtype)[tokens]
    ends = (last_index + 1 if lengths is None else lengths) - 1

    def run(graphdef: nnx.GraphDef, state: nnx.State, x: jax.Array, k: jax.Array, v: jax.Array,
            layer: tuple[int, ...]):
        return _attend_cached(nnx.merge(graphdef, state), x, cos, sin, k, v, layer, slots, starts, kv_len)

    if isinstance(model.layers, DecoderBlock):  # one block stacked for lax.scan (runtime.scan_layers)
        graphdef, state = nnx.split(model.layers)

        def body(x, layer):
            state, k_layer, v_layer = layer
            x, k_layer, v_layer = run(graphdef, state, x, k_layer, v_layer, ())
            return x, (k_layer, v_layer)

        x, (k, v) = jax.lax.scan(body, x, (state, cache.k, cache.v))
        cache = KVCache(k, v)
    else:
        k, v, linear = cache.k, cache.v, cache.linear
        for i, layer in enumerate(model.layers):
            if layer.linear:
                if linear is None:
                    raise ValueError("the cache has no linear-attention state for this hybrid model's linear layers; "
                                     "make it with KVCache.zeros(model.config, ...)")
                j = cfg.linear_layers.index(i)
                x, layer_state = _mix_cached(layer, x, _layer(linear, j), slots, starts, ends)
                linear = _set_layer(linear, j, layer_state)
                continue
            j = cfg.full_attention_layers.index(i)
            x, k, v = run(*nnx.split(layer), x, k, v, (j,))
        cache = KVCache(k, v, linear)
    hidden = model.norm(x[jnp.arange(x.shape[0]), last_index])
    return model.logits(hidden), cache
