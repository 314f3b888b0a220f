"""The one compiled step of the engine: run tokens through the cached forward pass and sample the next
token of each row. Prefill (one row, a padded prompt bucket) and decode (every slot, one token) are the
same function at different shapes; shapes come from a few power-of-two buckets, so compiles stay few."""

from __future__ import annotations

import functools

import jax
from flax import nnx

from tbjax.engine.sampling import RowSampling, sample
from tbjax.models.decoding import KVCache, forward_cached

MIN_BUCKET = 16


def bucket(n: int, limit: int) -> int:
    """The smallest power of two >= n (at least MIN_BUCKET), capped at `limit`."""
    size = MIN_BUCKET
    while size < n:
        size *= 2
    return min(size, limit)


@functools.partial(jax.jit, static_argnames=("graphdef", "kv_len"), donate_argnames=("cache",))
def step(graphdef: nnx.GraphDef, state: nnx.State, cache: KVCache, tokens: jax.Array, slots: jax.Array,
         starts: jax.Array, last_index: jax.Array, seeds: jax.Array, counters: jax.Array, sampling: RowSampling,
         kv_len: int) -> tuple[jax.Array, jax.Array, KVCache]:
    """-> (next token [rows] int32, its log-prob [rows] float32, updated cache). Row r's randomness is
    fold_in(key(seeds[r]), counters[r]): a seeded request samples the same tokens wherever it runs."""
    model = nnx.merge(graphdef, state)
    logits, cache = forward_cached(model, cache, tokens, slots, starts, last_index, kv_len)
    keys = jax.vmap(lambda s, c: jax.random.fold_in(jax.random.key(s), c))(seeds, counters)
    next_tokens, logprobs = sample(logits, keys, sampling)
    return next_tokens, logprobs, cache

