"""Sampling: which tokens stay eligible, empirical frequencies, greedy, and the log-prob convention."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tbjax.engine.sampling import TOP_K_WINDOW, RowSampling, sample, truncation_mask, window_eligible

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


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("setting", [(1.0, 20, 1.0, 0.0), (1.0, 20, 0.95, 0.0), (0.7, 5, 0.5, 0.0),
                                     (1.0, 64, 0.9, 0.05), (1.0, 1, 1.0, 0.0)])
def test_window_keeps_what_the_vocabulary_rule_keeps(seed, setting):
    """Rows with a small top-k choose inside lax.top_k's window; the tokens eligible there must be exactly
    those `truncation_mask` allows over the whole vocabulary."""
    logits = 3 * jax.random.normal(jax.random.key(seed), (3, 3072))
    params = rows(*[setting] * 3)
    scaled = logits / setting[0]
    ids, keep = window_eligible(jax.nn.log_softmax(scaled, axis=-1), params, TOP_K_WINDOW)
    windowed = np.zeros(logits.shape, bool)
    np.put_along_axis(windowed, np.asarray(ids), np.asarray(keep), axis=-1)
    np.testing.assert_array_equal(windowed, np.asarray(truncation_mask(scaled, params)))


def test_a_rows_draw_does_not_depend_on_its_batch_mates():
    """A seeded request samples the same tokens whatever shares its decode step, even a row that needs the
    whole-vocabulary way."""
    logits = 2 * jax.random.normal(jax.random.key(0), (9, 3072))
    keys = jax.random.split(jax.random.key(7), 9)
    windowed = [(1.0, 20, 0.95, 0.0)] * 8
    alone, _ = sample(logits[:8], keys[:8], rows(*windowed))
    mixed, _ = sample(logits, keys, rows(*windowed, (1.0, -1, 0.95, 0.0)))
    assert np.asarray(alone).tolist() == np.asarray(mixed)[:8].tolist()
