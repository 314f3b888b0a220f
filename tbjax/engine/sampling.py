"""Token sampling with per-row parameters, and the behaviour log-prob the trainer will recompute.

Every row carries its own temperature, top-k, top-p and min-p, so one compiled step serves requests with
different settings. The reported log-prob is log_softmax(logits / temperature) at the sampled token,
before truncation (SGLang's convention, and what the trainer's ratio uses); temperature 0 is greedy and
reports the untempered log-prob.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class RowSampling:
    """Per-row sampling settings, [rows] each. top_k <= 0 means off; top_p 1 and min_p 0 are off."""

    temperature: jax.Array
    top_k: jax.Array
    top_p: jax.Array
    min_p: jax.Array

    @classmethod
    def stack(cls, rows: list[tuple[float, int, float, float]]) -> RowSampling:
        t, k, p, m = zip(*rows, strict=True) if rows else ((), (), (), ())
        return cls(np.asarray(t, np.float32), np.asarray(k, np.int32), np.asarray(p, np.float32),
                   np.asarray(m, np.float32))


def _largest_threshold(probs: jax.Array, measure, target: jax.Array, iterations: int = 40) -> jax.Array:
    """Per row, (up to 2^-iterations of the top probability) the largest t with measure(probs >= t) >= target,
    by bisection: [rows, vocab] elementwise passes instead of a sort, which XLA's CPU backend does slowly."""
    low = jnp.zeros(probs.shape[:1], probs.dtype)
    high = jnp.max(probs, axis=-1) * 1.000001

    def halve(_, bounds):
        low, high = bounds
        mid = (low + high) / 2
        ok = measure(probs >= mid[:, None]) >= target
        return jnp.where(ok, mid, low), jnp.where(ok, high, mid)

    return jax.lax.fori_loop(0, iterations, halve, (low, high))[0]


def truncation_mask(scaled: jax.Array, params: RowSampling) -> jax.Array:
    """[rows, vocab] bool: the tokens top-k, top-p (nucleus: the most likely tokens until their mass reaches
    top_p, the crossing token included) and min-p leave eligible; the most likely token always is."""
    probs = jax.nn.softmax(scaled, axis=-1)
    vocab = scaled.shape[-1]
    top_k = jnp.where(params.top_k > 0, jnp.minimum(params.top_k, vocab), vocab).astype(probs.dtype)
    k_threshold = _largest_threshold(probs, lambda kept: jnp.sum(kept, axis=-1), top_k)
    p_threshold = _largest_threshold(probs, lambda kept: jnp.sum(jnp.where(kept, probs, 0.0), axis=-1),
                                     params.top_p)
    p_threshold = jnp.where(params.top_p >= 1.0, 0.0, p_threshold)
    keep = (probs >= k_threshold[:, None]) & (probs >= p_threshold[:, None])
    keep &= probs >= (params.min_p * jnp.max(probs, axis=-1))[:, None]
    return keep | (jnp.arange(vocab)[None, :] == jnp.argmax(scaled, axis=-1)[:, None])


def sample(logits: jax.Array, keys: jax.Array, params: RowSampling) -> tuple[jax.Array, jax.Array]:
    """logits [rows, vocab] float32, keys [rows] -> (tokens [rows] int32, logprobs [rows] float32)."""
    greedy = params.temperature <= 0
    scaled = logits / jnp.where(greedy, 1.0, params.temperature)[:, None]
    logprobs = jax.nn.log_softmax(scaled, axis=-1)
    eligible = jnp.where(truncation_mask(scaled, params), scaled, -jnp.inf)
    drawn = jax.vmap(jax.random.categorical)(keys, eligible)
    tokens = jnp.where(greedy, jnp.argmax(scaled, axis=-1), drawn).astype(jnp.int32)
    return tokens, jnp.take_along_axis(logprobs, tokens[:, None], axis=-1)[:, 0]
