"""The engine's compiled steps: run tokens through the cached forward pass and sample the next token of each
row. `step` serves prefill (one row, a padded prompt bucket); `decode` feeds the busy rows their last token
and samples `steps` tokens in one call, so the host's per-call cost (dispatch, reading results back, the
worker's bookkeeping: most of a tiny model's step) is paid once per `steps` tokens. Row r's randomness at
its n-th sampled token is fold_in(key(seeds[r]), n) in both, so how tokens are grouped into calls never
changes what is sampled. Shapes come from a few power-of-two buckets, so compiles stay few. `score` gives a
given sequence's teacher-forced log-probs (the weight probe, tbjax.trainer.weight_probe)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
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


@functools.partial(jax.jit, static_argnames=("graphdef", "kv_len", "steps"), donate_argnames=("cache",))
def decode(graphdef: nnx.GraphDef, state: nnx.State, cache: KVCache, tokens: jax.Array, slots: jax.Array,
           starts: jax.Array, seeds: jax.Array, counters: jax.Array, sampling: RowSampling, stops: jax.Array,
           budgets: jax.Array, kv_len: int, steps: int) -> tuple[jax.Array, jax.Array, KVCache]:
    """tokens [rows] (each row's last sampled token, not yet cached, to be written at `starts`) ->
    (the next `steps` tokens [rows, steps] int32, their log-probs [rows, steps] float32, updated cache).

    A row stays live until it samples one of its `stops` [rows, n] (padded with -1) or its `budgets` [rows]
    tokens (0: a padding row, never live). Dead rows keep running, the host drops what they sample, and
    their key/value writes land past their sequence's end, where later writes overwrite them before anything
    attends to them; but they feed a hybrid model's recurrent state nothing (length 0), since that state, unlike
    keys and values, cannot be rewound and must end exactly where the slot's sequence ends."""
    model = nnx.merge(graphdef, state)
    rows = tokens.shape[0]

    def one(i, carry):
        cache, last, live, out_tokens, out_logprobs = carry
        logits, cache = forward_cached(model, cache, last[:, None], slots, starts + i, jnp.zeros_like(starts),
                                       kv_len, lengths=live.astype(jnp.int32))
        keys = jax.vmap(lambda s, c: jax.random.fold_in(jax.random.key(s), c))(seeds, counters + i)
        last, logprobs = sample(logits, keys, sampling)
        live = live & ~jnp.any(last[:, None] == stops, axis=-1) & (i + 1 < budgets)
        return cache, last, live, out_tokens.at[:, i].set(last), out_logprobs.at[:, i].set(logprobs)

    carry = (cache, tokens, budgets > 0, jnp.zeros((rows, steps), jnp.int32), jnp.zeros((rows, steps), jnp.float32))
    cache, _, _, out_tokens, out_logprobs = jax.lax.fori_loop(0, steps, one, carry)
    return out_tokens, out_logprobs, cache


@functools.partial(jax.jit, static_argnames=("graphdef",))
def score(graphdef: nnx.GraphDef, state: nnx.State, tokens: jax.Array) -> jax.Array:
    """tokens [rows, n] -> log p(tokens[:, i + 1] | tokens[:, :i + 1]) [rows, n - 1] float32 at temperature 1,
    through the model's uncached forward pass over the served parameters: no cache row is taken, so scoring
    never disturbs generations in flight. Padding at the end of a row changes nothing before it (causal)."""
    logits = nnx.merge(graphdef, state)(tokens)[:, :-1]
    logprobs = jax.nn.log_softmax(logits, axis=-1)
    return jnp.take_along_axis(logprobs, tokens[:, 1:, None], axis=-1)[..., 0]
