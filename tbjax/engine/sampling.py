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


def truncation_mask(scaled: jax.Array, params: RowSampling) -> jax.Array:
    """[rows, vocab] bool: the tokens top-k, top-p (nucleus) and min-p leave eligible."""
    vocab = scaled.shape[-1]
    order = jnp.argsort(-scaled, axis=-1)
    sorted_logits = jnp.take_along_axis(scaled, order, axis=-1)
    sorted_probs = jax.nn.softmax(sorted_logits, axis=-1)
    rank = jnp.arange(vocab)[None, :]
    top_k = jnp.where(params.top_k > 0, params.top_k, vocab)[:, None]
    mass_before = jnp.cumsum(sorted_probs, axis=-1) - sorted_probs
    keep_sorted = (rank < top_k) & (mass_before < params.top_p[:, None])
    keep_sorted &= sorted_probs >= params.min_p[:, None] * sorted_probs[:, :1]
    keep_sorted = keep_sorted.at[:, 0].set(True)  # the most likely token always survives
    return jnp.zeros_like(keep_sorted).at[jnp.arange(scaled.shape[0])[:, None], order].set(keep_sorted)


def sample(logits: jax.Array, keys: jax.Array, params: RowSampling) -> tuple[jax.Array, jax.Array]:
    """logits [rows, vocab] float32, keys [rows] -> (tokens [rows] int32, logprobs [rows] float32)."""
    greedy = params.temperature <= 0
    scaled = logits / jnp.where(greedy, 1.0, params.temperature)[:, None]
    logprobs = jax.nn.log_softmax(scaled, axis=-1)
    eligible = jnp.where(truncation_mask(scaled, params), scaled, -jnp.inf)
    drawn = jax.vmap(jax.random.categorical)(keys, eligible)
    tokens = jnp.where(greedy, jnp.argmax(scaled, axis=-1), drawn).astype(jnp.int32)
    return tokens, jnp.take_along_axis(logprobs, tokens[:, None], axis=-1)[:, 0]
