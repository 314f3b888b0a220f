"""Token sampling with per-row parameters, and the behaviour log-prob the trainer will recompute.

Every row carries its own temperature, top-k, top-p and min-p, so one compiled step serves requests with
different settings. The reported log-prob is log_softmax(logits / temperature) at the sampled token,
before truncation (SGLang's convention, and what the trainer's ratio uses); temperature 0 is greedy and
reports the untempered log-prob.

Rows whose top-k is at most TOP_K_WINDOW (the seed run's 20) choose among `lax.top_k`'s window instead of
the whole vocabulary: drawing one Gumbel per vocabulary entry (threefry on CPU) cost more than the model's
whole forward pass at the tiny policy's 3,072 tokens, and the window needs TOP_K_WINDOW of them. Which way a
row takes depends only on its own settings, so a seeded request samples the same tokens whatever shares its
batch; the other rows' way (bisection over the vocabulary) runs only when some row needs it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

TOP_K_WINDOW = 64


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class RowSampling:
    """Per-row sampling settings, [rows] each: NumPy arrays as `stack` builds them on the host, jax Arrays
    inside a compiled step. top_k <= 0 means off; top_p 1 and min_p 0 are off."""

    temperature: jax.Array | np.ndarray
    top_k: jax.Array | np.ndarray
    top_p: jax.Array | np.ndarray
    min_p: jax.Array | np.ndarray

    @classmethod
    def stack(cls, rows: list[tuple[float, int, float, float]]) -> RowSampling:
        t, k, p, m = zip(*rows, strict=True) if rows else ((), (), (), ())
        return cls(np.asarray(t, np.float32), np.asarray(k, np.int32), np.asarray(p, np.float32),
                   np.asarray(m, np.float32))


def _largest_threshold(probs: jax.Array, measure: Callable[[jax.Array], jax.Array], target: jax.Array | np.ndarray,
                       iterations: int = 40) -> jax.Array:
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


def window_eligible(logprobs: jax.Array, params: RowSampling, width: int) -> tuple[jax.Array, jax.Array]:
    """For rows with 0 < top_k <= width: (their `width` most likely token ids [rows, width], which of those
    top-k, top-p and min-p leave eligible [rows, width] bool), the same rule as `truncation_mask` (ties at
    the k-th probability aside: here exactly k survive)."""
    top, ids = jax.lax.top_k(logprobs, width)  # sorted, most likely first
    probs = jnp.exp(top)
    before = jnp.cumsum(probs, axis=-1) - probs  # mass of the more likely tokens
    keep = jnp.arange(width)[None, :] < params.top_k[:, None]
    keep &= (before < params.top_p[:, None]) | (params.top_p[:, None] >= 1.0)
    keep &= probs >= params.min_p[:, None] * probs[:, :1]
    return ids, keep.at[:, 0].set(True)


def _draw_in_window(logprobs: jax.Array, keys: jax.Array, params: RowSampling, width: int) -> jax.Array:
    ids, keep = window_eligible(logprobs, params, width)
    top = jnp.take_along_axis(logprobs, ids, axis=-1)
    drawn = jax.vmap(jax.random.categorical)(keys, jnp.where(keep, top, -jnp.inf))
    return jnp.take_along_axis(ids, drawn[:, None], axis=-1)[:, 0]


def _draw_in_vocabulary(scaled: jax.Array, keys: jax.Array, params: RowSampling) -> jax.Array:
    eligible = jnp.where(truncation_mask(scaled, params), scaled, -jnp.inf)
    return jax.vmap(jax.random.categorical)(keys, eligible)


def sample(logits: jax.Array, keys: jax.Array, params: RowSampling) -> tuple[jax.Array, jax.Array]:
    """logits [rows, vocab] float32, keys [rows] -> (tokens [rows] int32, logprobs [rows] float32)."""
    greedy = params.temperature <= 0
    scaled = logits / jnp.where(greedy, 1.0, params.temperature)[:, None]
    logprobs = jax.nn.log_softmax(scaled, axis=-1)
    width = min(TOP_K_WINDOW, logits.shape[-1])
    in_window = (params.top_k > 0) & (params.top_k <= width)
    windowed = _draw_in_window(logprobs, keys, params, width)
    drawn = jax.lax.cond(jnp.all(in_window | greedy), lambda: windowed,
                         lambda: jnp.where(in_window, windowed, _draw_in_vocabulary(scaled, keys, params)))
    tokens = jnp.where(greedy, jnp.argmax(scaled, axis=-1), drawn).astype(jnp.int32)
    return tokens, jnp.take_along_axis(logprobs, tokens[:, None], axis=-1)[:, 0]
