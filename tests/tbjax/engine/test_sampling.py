"""Sampling: which tokens stay eligible, empirical frequencies, greedy, and the log-prob convention."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tbjax.engine.sampling import RowSampling, sample, truncation_mask

PROBS = np.array([0.5, 0.3, 0.15, 0.05])


def rows(*settings):
    return RowSampling.stack(list(settings))


@pytest.mark.parametrize("setting,eligible", [
    ((1.0, -1, 1.0, 0.0), [1, 1, 1, 1]),
    ((1.0, 2, 1.0, 0.0), [1, 1, 0, 0]),     # top-k 2
    ((1.0, -1, 0.7, 0.0), [1, 1, 0, 0]),    # nucleus: keep until 0.7 of the mass is covered
    ((1.0, -1, 0.81, 0.0), [1, 1, 1, 0]),
    ((1.0, -1, 1.0, 0.4), [1, 1, 0, 0]),    # min-p: p >= 0.4 * 0.5
    ((1.0, 1, 0.1, 0.9), [1, 0, 0, 0]),     # the top token always survives
])
def test_truncation(setting, eligible):
    logits = jnp.log(jnp.asarray([PROBS[::-1]]))[:, ::-1]  # same probabilities, built another way
    assert np.asarray(truncation_mask(logits, rows(setting)))[0].astype(int).tolist() == eligible


def test_frequencies_follow_renormalised_top_k():
    n = 4000
    logits = jnp.tile(jnp.log(jnp.asarray(PROBS, jnp.float32)), (n, 1))
    keys = jax.random.split(jax.random.key(0), n)
    tokens, logprobs = sample(logits, keys, rows(*[(1.0, 3, 1.0, 0.0)] * n))
    counts = np.bincount(np.asarray(tokens), minlength=4) / n
    expected = np.append(PROBS[:3] / PROBS[:3].sum(), 0)
    np.testing.assert_allclose(counts, expected, atol=0.03)
    # reported log-probs are before truncation: log p of the untruncated distribution
    np.testing.assert_allclose(np.asarray(logprobs), np.log(PROBS)[np.asarray(tokens)], atol=1e-6)


def test_temperature_scales_the_logprob_and_zero_is_greedy():
    logits = jnp.log(jnp.asarray([PROBS, PROBS], jnp.float32))
    keys = jax.random.split(jax.random.key(1), 2)
    tokens, logprobs = sample(logits, keys, rows((0.0, -1, 1.0, 0.0), (0.5, 1, 1.0, 0.0)))
    assert np.asarray(tokens).tolist() == [0, 0]
    tempered = jax.nn.log_softmax(jnp.log(jnp.asarray(PROBS)) / 0.5)
    np.testing.assert_allclose(np.asarray(logprobs), [np.log(0.5), tempered[0]], atol=1e-6)
