"""Episodes cut short (grpo.overlong, rollout.score_rule) through the trainer and the loop. Masked, a cut episode
still counts in its group's baseline but its tokens leave the loss: the gradient is that of the same batch
whose cut episodes sampled nothing trainable. Penalised, the gradient is that of the batch whose episodes
were graded with the shaped scores by hand, and a group the scheduler kept for its cut episode alone (equal
verdicts) is one the packer trains on. In the loop, the setting reaches the update: the same rollouts
(deterministic) leave something else to train on, and each step counts its cut episodes."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

from rollout.score_rule import ScoreRule
from tbjax.config import load_config
from tbjax.models import from_pretrained
from tbjax.sections.training import GRPOSection
from tbjax.trainer.packing import batch_from_groups
from tbjax.trainer.update import GRPOTrainer
from tests.rollout.score_rule_support import PENALTY, scheduled
from tests.tbjax.trainer.loop_support import metric_lines, train_for
from tests.tbjax.trainer.support import flat, synthetic_groups

BUDGET, BUFFER = 48, 10


def cut_some(groups):
    """Every third episode ran out of its budget, every third one after it had a turn cut at its cap."""
    cut = [[dataclasses.replace(t, termination="token_budget") if (g + m) % 3 == 0 else
            dataclasses.replace(t, truncated_turns=1) if (g + m) % 3 == 1 else t for m, t in enumerate(group)]
           for g, group in enumerate(groups)]
    assert any(t.termination == "token_budget" for group in cut for t in group)
    return cut


def gradients(trainer: GRPOTrainer, state, batch):
    assert batch is not None
    arrays = {k: jnp.asarray(v) for k, v in batch.arrays.items()}
    grads, _ = trainer.gradients(state.params, arrays, jnp.float32(batch.denominator))
    return flat(grads)


@pytest.fixture(scope="module")
def trainer_and_state(tiny_dir):
    model = from_pretrained(tiny_dir("qwen3"))
    trainer = GRPOTrainer(model, GRPOSection(), logprob_chunk=512)
    return trainer, trainer.init_state(model)


def test_a_masked_episode_counts_in_the_baseline_and_leaves_the_loss(trainer_and_state) -> None:
    trainer, state = trainer_and_state
    groups = cut_some(synthetic_groups())
    masked = batch_from_groups(groups, GRPOSection(), 128, 1,
                               score_rule=ScoreRule(overlong="mask", token_budget=BUDGET))
    untrainable = [[dataclasses.replace(t, loss_mask=[0] * len(t.loss_mask)) if t.termination == "token_budget"
                    or t.truncated_turns else t for t in group] for group in groups]
    expected = batch_from_groups(untrainable, GRPOSection(), 128, 1)
    assert masked is not None and expected is not None and masked.denominator == expected.denominator
    np.testing.assert_allclose(gradients(trainer, state, masked), gradients(trainer, state, expected),
                               rtol=1e-5, atol=1e-8)
    plain = batch_from_groups(groups, GRPOSection(), 128, 1)
    assert plain is not None and plain.denominator > masked.denominator


def test_the_soft_penalty_shapes_the_scores_as_computed_by_hand(trainer_and_state) -> None:
    trainer, state = trainer_and_state
    groups = cut_some(synthetic_groups())
    rule = GRPOSection(overlong="penalty", overlong_penalty=0.5, overlong_buffer=BUFFER).score_rule(BUDGET)
    shaped = batch_from_groups(groups, GRPOSection(), 128, 1, score_rule=rule)

    def by_hand(t):
        if t.termination == "token_budget" or t.truncated_turns:
            return t.reward - 0.5
        over = len(t.token_ids) - (BUDGET - BUFFER)
        return t.reward - 0.5 * over / BUFFER if over > 0 else t.reward
    graded = [[dataclasses.replace(t, reward=by_hand(t), termination="user_done", truncated_turns=0) for t in group]
              for group in groups]
    assert any(0 < t.reward - by_hand(t) < 0.5 for group in groups for t in group)  # some on the ramp
    np.testing.assert_allclose(gradients(trainer, state, shaped),
                               gradients(trainer, state, batch_from_groups(graded, GRPOSection(), 128, 1)),
                               rtol=1e-5, atol=1e-8)


def test_the_packer_trains_the_group_the_scheduler_kept_for_its_cut_episode() -> None:
    """Equal verdicts, one episode cut short: the scheduler keeps the group under the overlong penalty (its
    shaped scores differ), and the packer, given the same rule, pushes the cut episode down and the others up;
    with the verdicts alone it would have nothing to train on."""
    assert GRPOSection(overlong="penalty", overlong_penalty=0.5).score_rule(PENALTY.token_budget) == PENALTY
    (group,) = scheduled(PENALTY).groups
    packed = batch_from_groups([group.trajectories], GRPOSection(), 128, 1, score_rule=PENALTY)
    assert packed is not None
    advantages, mask = packed.arrays["advantages"], packed.arrays["mask"] != 0
    cut, *whole = group.trajectories
    assert np.count_nonzero(mask & (advantages < 0)) == sum(cut.loss_mask[1:])
    assert np.count_nonzero(mask & (advantages > 0)) == sum(sum(t.loss_mask[1:]) for t in whole)
    assert batch_from_groups([group.trajectories], GRPOSection(), 128, 1) is None


def test_settings_that_cannot_act_are_refused() -> None:
    with pytest.raises(ValueError, match="grpo.overlong_buffer shapes the score of episodes cut short"):
        GRPOSection(overlong_buffer=100)
    with pytest.raises(ValueError, match=r"grpo.overlong_penalty=1.5: give a share of a pass in \(0, 1\]"):
        GRPOSection(overlong="penalty", overlong_penalty=1.5)
    assert load_config(overrides=["grpo.overlong=mask"]).fingerprint() != load_config().fingerprint()


@pytest.mark.slow
def test_the_loop_masks_the_cut_episodes_and_counts_them(tiny_dir, tmp_path) -> None:
    """One step of one-turn, 16-token episodes (most cut at the cap), with and without masking: the same
    rollouts (deterministic), but what is left to train on differs."""
    model_dir = tiny_dir("qwen3")
    train_for(model_dir, tmp_path / "none", 1)
    train_for(model_dir, tmp_path / "mask", 1, "grpo.overlong=mask")
    (plain,), (masked,) = metric_lines(tmp_path / "none"), metric_lines(tmp_path / "mask")
    assert "episodes_cut" not in plain and 0 < masked["episodes_cut"] <= masked["episodes"]
    assert masked["groups"] == plain["groups"] and masked["pass_rate"] == plain["pass_rate"]  # the same rollouts
    assert not plain["skipped"]
    if masked["episodes_cut"] == 4 * sum(group["kept"] for group in masked["groups"]):  # config_for's groups of 4
        assert masked["skipped"]  # every kept episode was cut: nothing left to learn from
    else:
        assert masked["loss"] != plain["loss"]
