"""Importance weighting against the behaviour policy through the trainer: an engine whose log-probs sit a known
delta below the trainer's (it sampled under older weights, as batches produced ahead do) gives every token the
ratio exp(delta). Truncated (TIS) the token weighs min(exp(delta), cap), masked (MIS) exp(delta) up to the cap
and nothing above it; at the update's first step the ratio to the old policy is 1, so the gradient is the
unweighted objective's with every advantage multiplied by its token's weight, computed here by hand."""

import jax.numpy as jnp
import numpy as np
import pytest

from tbjax.models import from_pretrained
from tbjax.sections.training import GRPOSection
from tbjax.trainer.packing import batch_from_groups
from tbjax.trainer.update import GRPOTrainer
from tests.tbjax.trainer.support import flat, synthetic_groups

CAP = 2.0
DELTAS = (0.3, 1.2)  # exp: 1.35 (under the cap) and 3.32 (over it), on alternate episodes


@pytest.mark.parametrize("mode", ["truncate", "mask"])
def test_tis_and_mis_weights_and_gradient_equal_the_hand_computed_ones(tiny_dir, mode) -> None:
    model = from_pretrained(tiny_dir("qwen3"))
    weighted = GRPOTrainer(model, GRPOSection(tis_cap=CAP, tis_mode=mode), logprob_chunk=512)
    unweighted = GRPOTrainer(model, GRPOSection(tis_cap=None), logprob_chunk=512)
    state = weighted.init_state(model)
    batch = batch_from_groups(synthetic_groups(), GRPOSection(), 128, 1)
    assert batch is not None
    arrays = batch.arrays
    mask = arrays["mask"] != 0
    delta = np.where(arrays["segments"] % 2 == 0, DELTAS[0], DELTAS[1])
    own = np.asarray(weighted.logprobs(state.params, batch))
    arrays["behaviour_logprobs"] = np.where(mask, own - delta, 0.0).astype(np.float32)

    ratio = np.exp(delta)
    weight = np.minimum(ratio, CAP) if mode == "truncate" else np.where(ratio <= CAP, ratio, 0.0)
    by_hand = {**arrays, "advantages": (arrays["advantages"] * weight).astype(np.float32)}
    denominator = jnp.float32(batch.denominator)
    grads, sums = weighted.gradients(state.params, {k: jnp.asarray(v) for k, v in arrays.items()}, denominator)
    expected, _ = unweighted.gradients(state.params, {k: jnp.asarray(v) for k, v in by_hand.items()}, denominator)

    assert float(sums["tis_weight"]) == pytest.approx(float(weight[mask].sum()), rel=1e-4)
    assert float(sums["tis_truncated"]) == int((mask & (ratio > CAP)).sum()) > 0
    np.testing.assert_allclose(flat(grads), flat(expected), rtol=2e-4, atol=1e-7)
    assert np.abs(flat(grads)).max() > 1e-4  # a real gradient


def test_masking_needs_a_cap() -> None:
    with pytest.raises(ValueError, match="grpo.tis_mode=mask acts on the ratios above grpo.tis_cap"):
        GRPOSection(tis_cap=None, tis_mode="mask")
