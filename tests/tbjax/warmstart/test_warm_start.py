"""Warm start: the GRPO update with unit advantages is a maximum-likelihood step, batches are a pure function
of (seed, step), and a resumed warm start ends where an uninterrupted one does."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.oracle import Slip
from tbjax.models import from_pretrained
from tbjax.sections.training import WarmStartSection
from tbjax.trainer.packing import pack
from tbjax.trainer.update import GRPOTrainer
from tbjax.warmstart.warm_start import MLE, step_batch, warm_start
from tests.tbjax.trainer.support import flat, synthetic_groups

DEMOS = [t for group in synthetic_groups(seed=3) for t in group]


def test_unit_advantage_update_is_the_negative_log_likelihood_gradient(tiny_dir) -> None:
    model = from_pretrained(tiny_dir("qwen3"))
    trainer = GRPOTrainer(model, MLE, logprob_chunk=512)
    params = trainer.init_state(model).params
    trained = sum(sum(t.loss_mask[1:]) for t in DEMOS)
    batch = pack(DEMOS, [1.0] * len(DEMOS), [1.0] * len(DEMOS), trained, 256, 1)
    arrays = {k: jnp.asarray(v) for k, v in batch.arrays.items()}
    grads, sums = trainer.gradients(params, arrays, jnp.float32(batch.denominator))

    # the reference: every demonstration right-padded into one batch (causal, so padding changes no earlier logit)
    length = max(len(t.token_ids) for t in DEMOS)
    ids = jnp.asarray([t.token_ids + [0] * (length - len(t.token_ids)) for t in DEMOS])
    mask = jnp.asarray([t.loss_mask[1:] + [0] * (length - len(t.token_ids)) for t in DEMOS], jnp.float32)

    def mean_nll(p):
        view = trainer.model_for(p)
        logp = jax.nn.log_softmax(view.logits(view.hidden_states(ids))[:, :-1].astype(jnp.float32))
        picked = jnp.take_along_axis(logp, ids[:, 1:, None], axis=-1)[..., 0]
        return -jnp.sum(picked * mask) / trained

    expected = jax.jit(jax.grad(mean_nll))(params)
    np.testing.assert_allclose(flat(grads), flat(expected), atol=2e-6)
    assert float(sums["nll"]) / trained == pytest.approx(float(mean_nll(params)), rel=1e-5)
    assert np.abs(flat(expected)).max() > 1e-4


def test_step_batches_are_seeded_epochs() -> None:
    demos = list(range(10))
    config = WarmStartSection(episodes_per_step=2, seed=1)
    first_epoch = [x for step in range(5) for x in step_batch(demos, step, config)]
    assert sorted(first_epoch) == demos  # every demonstration once per epoch
    assert step_batch(demos, 7, config) == step_batch(demos, 7, config)
    assert first_epoch != [x for step in range(5, 10) for x in step_batch(demos, step, config)]


def test_fresh_values_are_drawn_per_step_and_reproducible() -> None:
    digits = list(range(100, 110))
    demo = dataclasses.replace(DEMOS[0], token_ids=[5, 101, 102, 103, 104, 7, 101, 102, 103, 104, 9][:11],
                               loss_mask=[0] * 11, logprobs=[0.0] * 11)
    config = WarmStartSection(episodes_per_step=1, fresh_values=1.0)
    drawn = [step_batch([demo], step, config, digits)[0].token_ids for step in range(4)]
    assert drawn[0] == step_batch([demo], 0, config, digits)[0].token_ids  # a resumed run draws the same
    assert len({tuple(ids) for ids in drawn}) > 1
    with pytest.raises(ValueError, match="digit ids"):
        step_batch([demo], 0, config)


@pytest.mark.parametrize("drills", [0, 2])  # with copy drills, the run is interrupted after its first demo update
def test_resumed_warm_start_equals_the_uninterrupted_one(tiny_dir, tmp_path, drills) -> None:
    path = tiny_dir("qwen3")
    config = WarmStartSection(steps=3, episodes_per_step=4, learning_rate=1e-3, warmup_steps=1, checkpoint_every=1,
                             copy_drills=drills)
    straight = warm_start(from_pretrained(path), path, DEMOS, config, tmp_path / "a", row_len=256)
    warm_start(from_pretrained(path), path, DEMOS, WarmStartSection(**{**config.__dict__, "steps": 1}),
               tmp_path / "b", row_len=256)
    # resumed with another save interval: bookkeeping, not part of the run's identity
    resumed = warm_start(from_pretrained(path), path, DEMOS, WarmStartSection(**{**config.__dict__,
                         "checkpoint_every": 2}), tmp_path / "b", row_len=256)
    a, b = from_pretrained(straight), from_pretrained(resumed)
    np.testing.assert_array_equal(np.asarray(a.embed_tokens[...]), np.asarray(b.embed_tokens[...]))
    assert not np.array_equal(np.asarray(a.embed_tokens[...]), np.asarray(from_pretrained(path).embed_tokens[...]))
    assert len((tmp_path / "b" / "metrics.jsonl").read_text().splitlines()) == drills + 3
    assert resumed.name == f"v{drills + 3}"


def test_slipped_demonstrations_are_drawn_at_their_rates_and_reproducibly() -> None:
    """Each draw of a task shows its slip with the configured chance, drawn anew per step (so the policy learns
    how often to slip, not which task to slip on), and a resumed warm start draws the same."""
    demos = [dataclasses.replace(DEMOS[0], task_id=f"t{i}") for i in range(8)]
    wrong = {f"t{i}": {Slip.SKIP_VERIFICATION: dataclasses.replace(demos[i], group_id="unverified"),
                       Slip.STOP_EARLY: dataclasses.replace(demos[i], group_id="slipped")} for i in range(8)}
    config = WarmStartSection(episodes_per_step=8, slips={"stop_early": 0.3})
    draws = [step_batch(demos, step, config, slipped=wrong) for step in range(200)]
    share = np.mean([d.group_id == "slipped" for batch in draws for d in batch])
    assert 0.25 < share < 0.35  # skip_verification has rate 0 and precedes it: never drawn, no effect on the draw
    assert not any(d.group_id == "unverified" for batch in draws for d in batch)
    assert draws[7] == step_batch(demos, 7, config, slipped=wrong)
    assert {d.task_id for batch in draws for d in batch if d.group_id == "slipped"} == {f"t{i}" for i in range(8)}
    with pytest.raises(ValueError, match="slipped demonstrations"):
        step_batch(demos, 0, config)


def test_a_slip_no_task_admits_is_refused_before_training(tiny_dir, tmp_path) -> None:
    path = tiny_dir("qwen3")
    wrong = {DEMOS[0].task_id: {Slip.STOP_EARLY: DEMOS[0]}}
    config = WarmStartSection(steps=1, slips={"stop_early": 0.2, "bypass_approval": 0.25})
    with pytest.raises(ValueError, match=r"\['bypass_approval'\], which no warm-start task admits"):
        warm_start(from_pretrained(path), path, DEMOS, config, tmp_path, row_len=256, slipped=wrong)
    assert not (tmp_path / "checkpoints").exists()


@pytest.mark.parametrize(("slips", "error"), [({"stop_erly": 0.1}, "unknown slips"), ({"leak": 1.5}, r"\[0, 1\]"),
                                              ({"stop_early": 0.6, "bypass_approval": 0.5}, "add up to 1.10")])
def test_bad_slip_rates_are_refused_by_name(slips, error) -> None:
    with pytest.raises(ValueError, match=error):
        WarmStartSection(slips=slips)
