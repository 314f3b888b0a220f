"""tbjax.trainer.objective: the GRPO math against hand-derived values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tbjax.sections.training import GRPOSection
from tbjax.trainer.logprobs import chunked_logprobs
from tbjax.trainer.objective import group_advantages, policy_loss_terms, token_weights


def test_advantages_use_population_std():
    rewards = np.array([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0]])
    # group 2: mean 0.75, population std sqrt(0.1875) = 0.4330
    expected = np.array([[1, -1, -1, 1], [0.25 / 0.4330127, 0.25 / 0.4330127, 0.25 / 0.4330127, -0.75 / 0.4330127]])
    np.testing.assert_allclose(group_advantages(rewards), expected, rtol=1e-5)
    np.testing.assert_allclose(group_advantages(rewards, normalize_std=False), [[0.5, -0.5, -0.5, 0.5],
                                                                                [0.25, 0.25, 0.25, -0.75]])
    assert np.all(group_advantages(np.ones((1, 8))) == 0)  # no signal: zero, not NaN


NO_TIS = GRPOSection(tis_cap=None)


def terms(logp, old, adv, config=NO_TIS, behaviour=None, weights=None):
    logp, old, adv = (jnp.asarray(x, jnp.float32) for x in (logp, old, adv))
    behaviour = old if behaviour is None else jnp.asarray(behaviour, jnp.float32)
    weights = jnp.ones_like(logp) if weights is None else jnp.asarray(weights, jnp.float32)
    return policy_loss_terms(logp, old, behaviour, adv, jnp.ones_like(logp), weights, config)


def test_clipped_objective_by_hand():
    # ratios 1.5 (A>0: clipped at 1.28), 0.5 (A<0: clipped at 0.8 -> max(-(-1)*0.5, -(-1)*0.8) = 0.8), 1.0
    logp = np.log([1.5, 0.5, 1.0])
    out = terms(logp, np.zeros(3), [1.0, -1.0, 2.0])
    assert float(out["loss"]) == pytest.approx(-1.28 + 0.8 - 2.0, abs=1e-6)
    assert float(out["clipped"]) == 2.0 and float(out["tokens"]) == 3.0


def test_dual_clip_bounds_negative_advantages():
    out = terms(np.log([5.0]), [0.0], [-1.0], GRPOSection(tis_cap=None, dual_clip=3.0))
    assert float(out["loss"]) == pytest.approx(3.0)  # not 5.0


def test_truncated_importance_sampling_weights():
    config = GRPOSection(tis_cap=2.0)
    # old/behaviour ratios: e^1 = 2.72 -> capped at 2; e^-1 = 0.37 kept; NaN behaviour -> weight 1
    out = terms([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0], config, behaviour=[-1.0, 1.0, np.nan])
    assert float(out["loss"]) == pytest.approx(-(2.0 + np.exp(-1.0) + 1.0), rel=1e-6)
    assert float(out["tis_truncated"]) == 1.0


def test_k3_kl_penalty():
    config = GRPOSection(tis_cap=None, kl_coef=0.5)
    logp, ref = jnp.asarray([-1.0]), jnp.asarray([-2.0])
    out = policy_loss_terms(logp, logp, logp, jnp.zeros(1), jnp.ones(1), jnp.ones(1), config, ref)
    k3 = np.exp(-1.0) - (-1.0) - 1.0
    assert float(out["kl"]) == pytest.approx(k3) and float(out["loss"]) == pytest.approx(0.5 * k3)


@pytest.mark.parametrize("aggregation,weights,denominator", [
    ("token_mean", [1, 1, 1], 10.0),
    ("seq_mean_token_mean", [1 / 2, 1 / 8, 0], 2.0),
    ("seq_mean_token_sum_norm", [1 / 16, 1 / 16, 1 / 16], 2.0),
])
def test_aggregation_weights_and_denominators(aggregation, weights, denominator):
    w, d = token_weights(np.array([2, 8, 0]), GRPOSection(aggregation=aggregation, norm_length=16))
    np.testing.assert_allclose(w, weights)
    assert d == denominator


def test_chunked_logprobs_and_entropy_equal_the_dense_computation():
    rng = np.random.default_rng(0)
    hidden = jnp.asarray(rng.normal(size=(2, 5, 8)), jnp.float32)
    table = jnp.asarray(rng.normal(size=(37, 8)), jnp.float32)  # 37: not a multiple of the chunk
    targets = jnp.asarray(rng.integers(0, 37, size=(2, 5)), jnp.int32)
    logp, entropy = chunked_logprobs(hidden, table, targets, temperature=0.8, chunk=16)
    dense = jax.nn.log_softmax(jnp.einsum("bsd,vd->bsv", hidden, table) / 0.8)
    np.testing.assert_allclose(logp, jnp.take_along_axis(dense, targets[..., None], -1)[..., 0], atol=1e-5)
    np.testing.assert_allclose(entropy, -(jnp.exp(dense) * dense).sum(-1), atol=1e-5)
