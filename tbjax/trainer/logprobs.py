"""Token log-probs and entropies from hidden states, one vocabulary chunk at a time.

A [tokens, vocab] float32 logits matrix is the largest tensor of a GRPO step at a real vocabulary; here
only [tokens, chunk] exists at once: a scan over vocabulary chunks keeps a running max,
log-sum-exp and entropy accumulator, and picks each target's logit from the chunk that holds it. When
all the logits would be large (over `KEEP_LOGITS_BYTES`) the chunk body is rematerialised, so the backward
pass does not keep every chunk's logits either. Below that, or with one chunk (chunk >= vocab), they are
kept: the head's backward runs first, while every activation of the trunk is still alive, so recomputing
would cost a fourth vocabulary matmul and save next to no peak memory (scripts/bench/grpo_step.py measures
the difference).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

# Logits up to this size are kept for the backward pass, not recomputed (see above): a large model's step at a
# real vocabulary stays far above it, a laptop step far below.
KEEP_LOGITS_BYTES = 256 << 20


def kept_logits_bytes(tokens: int, vocab: int) -> int:
    """The float32 logits a step of `tokens` head positions keeps for its backward pass (0: recomputed)."""
    size = tokens * vocab * 4
    return size if size <= KEEP_LOGITS_BYTES else 0


def chunked_logprobs(hidden: jax.Array, table: jax.Array, targets: jax.Array, temperature: float = 1.0,
                     chunk: int = 8192) -> tuple[jax.Array, jax.Array]:
    """hidden [..., embed], table [vocab, embed] (the unembedding), targets [...] int32 ->
    (log p(target) [...] float32, entropy [...] float32) of softmax(hidden @ table.T / temperature)."""
    vocab = table.shape[0]
    chunk = min(chunk, vocab)
    pad = (-vocab) % chunk
    if pad:
        table = jnp.concatenate([table, jnp.zeros((pad, table.shape[1]), table.dtype)])
    chunks = table.reshape(-1, chunk, table.shape[1])
    lead = hidden.shape[:-1]
    flat_hidden = hidden.reshape(-1, hidden.shape[-1])  # one leading dim: see tbjax.models.layers.flat_dot
    neg_inf = jnp.full(lead, -jnp.inf, jnp.float32)
    zeros = jnp.zeros(lead, jnp.float32)

    def body(carry, inputs):
        running_max, sum_exp, sum_exp_z, target_logit = carry
        index, weights = inputs
        z = jnp.einsum("nd,vd->nv", flat_hidden, weights.astype(hidden.dtype),
                       preferred_element_type=jnp.float32).reshape(*lead, chunk) / temperature
        if pad:  # padding columns take no probability (a full pass over the chunk, so only when there are any)
            z = jnp.where(index * chunk + jnp.arange(chunk) < vocab, z, -jnp.inf)
        new_max = jnp.maximum(running_max, jnp.max(z, axis=-1))
        rescale = jnp.exp(running_max - new_max)
        p = jnp.exp(z - new_max[..., None])
        sum_exp = sum_exp * rescale + jnp.sum(p, axis=-1)
        p_z = jnp.where(p > 0, p * z, 0.0) if pad else p * z  # 0 * -inf is NaN on padding columns
        sum_exp_z = sum_exp_z * rescale + jnp.sum(p_z, axis=-1)
        local = targets - index * chunk
        in_chunk = (local >= 0) & (local < chunk)
        picked = jnp.take_along_axis(z, jnp.clip(local, 0, chunk - 1)[..., None], axis=-1)[..., 0]
        target_logit = jnp.where(in_chunk, picked, target_logit)
        return (new_max, sum_exp, sum_exp_z, target_logit), None

    if chunks.shape[0] > 1 and kept_logits_bytes(flat_hidden.shape[0], vocab) == 0:
        body = jax.checkpoint(body)
    (m, s, sz, target_logit), _ = jax.lax.scan(body, (neg_inf, zeros, zeros, zeros),
                                               (jnp.arange(chunks.shape[0]), chunks))
    log_normalizer = m + jnp.log(s)
    entropy = log_normalizer - sz / s
    return target_logit - log_normalizer, entropy


def trained_logprobs(hidden: jax.Array, table: jax.Array, targets: jax.Array, head_index: jax.Array,
                     temperature: float = 1.0, chunk: int = 8192) -> tuple[jax.Array, jax.Array]:
    """chunked_logprobs computed only at the positions `head_index` lists (tbjax.trainer.packing.trained_positions),
    returned in place: hidden [rows, len, embed], targets [rows, len], head_index [shards, head_tokens] of flat
    positions within each shard's rows (-1: none) -> (log-probs, entropies) [rows, len], zero where not listed.
    Gathering per shard keeps it local to the devices that hold those rows."""
    rows, length, embed = hidden.shape
    shards = head_index.shape[0]
    listed = head_index >= 0
    index = jnp.maximum(head_index, 0)
    picked_hidden = jnp.take_along_axis(hidden.reshape(shards, -1, embed), index[..., None], axis=1)
    picked_targets = jnp.take_along_axis(targets.reshape(shards, -1), index, axis=1)
    logprobs, entropy = chunked_logprobs(picked_hidden, table, picked_targets, temperature, chunk)
    shard = jnp.arange(shards)[:, None]

    def in_place(values: jax.Array) -> jax.Array:
        placed = jnp.zeros((shards, rows // shards * length), jnp.float32)
        return placed.at[shard, index].add(jnp.where(listed, values, 0.0)).reshape(rows, length)

    return in_place(logprobs), in_place(entropy)
