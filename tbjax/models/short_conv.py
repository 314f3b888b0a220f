"""Causal depthwise convolution over time (Gated DeltaNet's short conv, kernel 4), with a decode state.

Each feature channel has its own kernel: y_t = sum_s w[K-1-s] * x_{t-s}. Inputs from another document
count as zero, so packed sequences never mix. For decoding, the state is the last K-1 inputs of the
sequence so far; a row's new state is taken at its own last real token (`ends`), so the padding of a
prefill bucket never enters it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def causal_conv(x: jax.Array, weight: jax.Array, docs: jax.Array, state: jax.Array | None = None,
                ends: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """x: [batch, seq, *features]; weight: [kernel, *features]; docs: [batch, seq] int32 document counter
    (see gated_delta.document_index); state: [batch, kernel - 1, *features], the inputs just before x, part
    of the first token's document (None: zeros); ends: [batch] index of each row's last real token (None: the
    last; -1: none) -> (y like x, new state [batch, kernel - 1, *features])."""
    width = weight.shape[0] - 1
    b, t = x.shape[:2]
    if state is None:
        state = jnp.zeros((b, width, *x.shape[2:]), x.dtype)
    padded = jnp.concatenate([state.astype(x.dtype), x], axis=1)
    padded_docs = jnp.concatenate([jnp.broadcast_to(docs[:, :1], (b, width)), docs], axis=1)
    features = (1,) * (x.ndim - 2)
    y = jnp.zeros(x.shape, jnp.promote_types(x.dtype, jnp.float32))
    for lag in range(width + 1):
        same_doc = (padded_docs[:, width - lag:width - lag + t] == docs).reshape(b, t, *features)
        shifted = jnp.where(same_doc, padded[:, width - lag:width - lag + t], 0)
        y = y + shifted.astype(y.dtype) * weight[width - lag].astype(y.dtype)
    if ends is None:
        ends = jnp.full((b,), t - 1, jnp.int32)
    # padded positions of inputs ends-K+2 .. ends; ends = -1 (no real token) keeps the old state
    window = ends[:, None] + 1 + jnp.arange(width)[None, :]
    last_doc = jnp.take_along_axis(docs, jnp.maximum(ends, 0)[:, None], axis=1)
    kept = jnp.take_along_axis(padded_docs, window, axis=1) == last_doc
    new_state = jnp.take_along_axis(padded, window.reshape(b, width, *features), axis=1)
    new_state = jnp.where(kept.reshape(b, width, *features), new_state, 0)
    return y.astype(x.dtype), new_state
