"""What drives an update: several optimizer steps per rollout batch (PPO epochs, mini-batches) against old
log-probs computed once, the KL penalty to the reference, and the gradient checked against torch."""

import functools
import operator

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

from tbjax.config import ConfigError, load_config
from tbjax.models import from_pretrained
from tbjax.models.hf.layout import hf_layouts
from tbjax.parallel.mesh import make_mesh, parse_mesh_spec
from tbjax.sections.training import GRPOSection, OptimSection
from tbjax.trainer.objective import OLD_LOGPROBS
from tbjax.trainer.packing import batch_from_groups, split_episodes
from tbjax.trainer.train_state import TrainState
from tbjax.trainer.update import GRPOTrainer
from tests.tbjax.trainer.support import flat, graded_groups
from tests.tbjax.trainer.torch_reference_support import TIS_CAP, group_advantages, torch_loss, with_behaviour_near

FAST = OptimSection(learning_rate=1e-2)  # large enough that one step moves ratios out of [0.8, 1.28]


def copied(state: TrainState) -> TrainState:
    """A state with buffers of its own (updates donate theirs)."""
    return jax.tree.map(jnp.copy, state)


def arrays(batch) -> dict[str, jax.Array]:
    return {k: jnp.asarray(v) for k, v in batch.arrays.items()}


def model_logprobs(model, batch) -> np.ndarray:
    """The trained targets' log-probs from the model's full logits, position by position: [micro, rows, len]."""
    out = []
    for m in range(batch.shape[0]):
        a = {k: jnp.asarray(v[m]) for k, v in batch.arrays.items()}
        logits = model(a["tokens"], a["positions"], a["segments"])
        picked = jnp.take_along_axis(jax.nn.log_softmax(logits, -1), a["targets"][..., None], -1)[..., 0]
        out.append(np.where(batch.arrays["mask"][m] != 0, np.asarray(picked), 0.0))
    return np.stack(out)


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return tiny_dir("qwen3")


# ----------------------------------------------------------------------------- several steps per batch
def test_the_clip_binds_from_the_second_epoch_on(tiny):
    """ppo_epochs=2: step 1 has ratio 1 (nothing clipped), step 2 compares with the pre-update log-probs, so
    the clip binds and its range changes the gradient."""
    model = from_pretrained(tiny)
    grpo = GRPOSection()
    trainer = GRPOTrainer(model, grpo, FAST, logprob_chunk=512, ppo_epochs=2)
    state = trainer.init_state(model)
    batch = batch_from_groups(graded_groups(), grpo, 128, 1)
    fresh = copied(state)
    prepared = trainer.prepare(state.params, batch)
    [part] = prepared.mini_batches
    first_epoch = GRPOTrainer(model, grpo, FAST, logprob_chunk=512)  # one step over the prepared batch
    state, first = first_epoch.update(state, prepared)
    assert first["clip_fraction"] == 0.0
    wide = GRPOTrainer(model, GRPOSection(clip_low=10.0, clip_high=10.0), FAST, logprob_chunk=512)
    denominator = jnp.float32(part.denominator)
    tight_grads, tight = trainer.gradients(state.params, arrays(part), denominator)
    wide_grads, wide_sums = wide.gradients(state.params, arrays(part), denominator)
    assert float(tight["clipped"]) / float(tight["tokens"]) > 0.05 and float(wide_sums["clipped"]) == 0.0
    difference = np.abs(flat(tight_grads) - flat(wide_grads)).max()
    assert difference > 0.05 * np.abs(flat(wide_grads)).max()
    _, metrics = trainer.update(fresh, trainer.prepare(fresh.params, batch))
    assert metrics["optimizer_steps"] == 2
    assert metrics["clip_fraction"] == pytest.approx(float(tight["clipped"]) / float(tight["tokens"]) / 2, rel=1e-5)


def test_old_logprobs_are_computed_once_before_the_first_step(tiny):
    """The forward program runs once per mini-batch, all before the first optimizer step, and gives the
    model's own log-probs of the trained targets."""
    model = from_pretrained(tiny)
    grpo = GRPOSection()
    trainer = GRPOTrainer(model, grpo, FAST, logprob_chunk=512, ppo_epochs=2, mini_batches=2)
    state = trainer.init_state(model)
    batch = batch_from_groups(graded_groups(), grpo, 128, 1)
    for part in trainer.prepare(state.params, batch).mini_batches:
        want = model_logprobs(trainer.model_for(state.params), part)
        np.testing.assert_allclose(np.asarray(part.arrays[OLD_LOGPROBS]), want, atol=1e-5)
    calls = []

    def counted(name: str):
        program = getattr(trainer.programs, name)
        return lambda *args: calls.append(name) or program(*args)

    trainer.programs = trainer.programs._replace(forward=counted("forward"), apply=counted("apply"))
    _, metrics = trainer.update(state, trainer.prepare(state.params, batch))
    assert calls == ["forward"] * 2 + ["apply"] * 4 and metrics["optimizer_steps"] == 4
    assert metrics["trained_tokens"] == batch.trained_tokens


def test_the_first_of_several_steps_is_the_single_step_update(tiny):
    """Old log-probs from the forward program equal the gradient program's own: the first step of a
    ppo_epochs=2 update is today's one-step update (gradient to 1e-6, the same metrics and parameters)."""
    grpo, groups = GRPOSection(), graded_groups(seed=1)
    results = []
    for epochs in (1, 2):
        model = from_pretrained(tiny)
        trainer = GRPOTrainer(model, grpo, OptimSection(), logprob_chunk=512, ppo_epochs=epochs)
        state = trainer.init_state(model)
        batch = batch_from_groups(groups, grpo, 64, 1)
        prepared = trainer.prepare(state.params, batch)
        [part] = prepared.mini_batches
        assert (OLD_LOGPROBS in part.arrays) == (epochs == 2)
        grads, _ = trainer.gradients(state.params, arrays(part), jnp.float32(part.denominator))
        one_step = GRPOTrainer(model, grpo, OptimSection(), logprob_chunk=512)  # the first step alone
        state, metrics = one_step.update(state, prepared)
        results.append((flat(grads), flat(state.params), metrics))
    (grads, params, metrics), (grads2, params2, metrics2) = results
    np.testing.assert_allclose(grads2, grads, atol=1e-6)
    np.testing.assert_allclose(params2, params, atol=1e-6)
    assert metrics2.keys() == metrics.keys() and metrics2["clip_fraction"] == 0.0
    for key in metrics:
        assert metrics2[key] == pytest.approx(metrics[key], rel=1e-5, abs=1e-6), key


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean"])
def test_mini_batches_hold_whole_episodes_with_denominators_of_their_own(aggregation):
    grpo = GRPOSection(aggregation=aggregation)
    batch = batch_from_groups(graded_groups(), grpo, 128, 2)
    parts = split_episodes(batch, 3, grpo)
    assert [p.episodes for p in parts] == [4, 4, 4]
    assert sum(p.trained_tokens for p in parts) == batch.trained_tokens
    assert sum(p.denominator for p in parts) == batch.denominator
    for part in parts:
        assert part.shape[1:] == batch.shape[1:]
        if aggregation == "token_mean":
            assert part.denominator == part.arrays["mask"].sum()
    assert sorted(np.concatenate([p.arrays["advantages"][p.arrays["mask"] != 0] for p in parts])) == sorted(
        batch.arrays["advantages"][batch.arrays["mask"] != 0])
    with pytest.raises(ValueError, match="train.mini_batches=13 exceeds the 12 episodes"):
        split_episodes(batch, 13, grpo)


# ----------------------------------------------------------------------------- KL to the reference
@pytest.mark.parametrize("estimator,placements", [("k1", ("host",)), ("k3", ("device", "host"))])
def test_kl_is_zero_at_the_reference_and_grows_after_a_step(tiny, estimator, placements):
    """Two updates on one batch from the reference: KL 0 in the first, not in the second; the reference
    waiting in pinned host memory gives bitwise the result of the one kept on the device. k3 is never negative;
    k1 is the mean of log pi - log ref, here over tokens the policy did not sample (either sign): exactly the
    change of the trained tokens' mean log-likelihood since the reference (`nll` is the current policy's)."""
    grpo, groups = GRPOSection(kl_coef=0.5, kl_estimator=estimator), graded_groups(seed=2)
    outcomes = []
    for placement in placements:
        model = from_pretrained(tiny)
        trainer = GRPOTrainer(model, grpo, FAST, logprob_chunk=512, reference_placement=placement)
        state = trainer.init_state(model)
        trainer.keep_reference(state.params)
        kinds = {x.sharding.memory_kind for x in jax.tree.leaves(trainer.reference)}
        assert kinds == {"pinned_host" if placement == "host" else "device"}
        batch = batch_from_groups(groups, grpo, 128, 1)
        state, first = trainer.update(state, trainer.prepare(state.params, batch))
        state, second = trainer.update(state, trainer.prepare(state.params, batch))
        assert abs(first["kl"]) < 1e-6
        if estimator == "k3":
            assert second["kl"] > 1e-3
        else:
            assert abs(second["kl"]) > 1e-3
            assert second["kl"] == pytest.approx(first["nll"] - second["nll"], abs=1e-5)
        outcomes.append((flat(state.params), first, second))
    for params, *metrics in outcomes[1:]:
        np.testing.assert_array_equal(params, outcomes[0][0])
        assert metrics == list(outcomes[0][1:])


def test_kl_without_a_reference_is_an_error(tiny):
    model = from_pretrained(tiny)
    trainer = GRPOTrainer(model, GRPOSection(kl_coef=0.1), logprob_chunk=512)
    batch = batch_from_groups(graded_groups(), trainer.grpo, 128, 1)
    with pytest.raises(ValueError, match="needs a reference policy"):
        trainer.prepare(trainer.init_state(model).params, batch)
    with pytest.raises(ValueError, match="train.ppo_epochs=0"):
        GRPOTrainer(model, ppo_epochs=0)


@pytest.mark.parametrize("overrides,message", [
    (["grpo.kl_coef=0", "grpo.kl_estimator=k3"], "grpo.kl_estimator=k3 has no effect with grpo.kl_coef=0"),
    (["grpo.kl_coef=-0.1"], "grpo.kl_coef=-0.1 is negative"),
    (["train.ppo_epochs=0"], "train.ppo_epochs: Input should be greater than 0"),
    (["train.mini_batches=0"], "train.mini_batches: Input should be greater than 0"),
    (["train.mini_batches=9"], "train.mini_batches=9 exceeds groups.group_size=8"),
    (["grpo.kl_coef=0", "train.reference_placement=host"], "train.reference_placement=host places a KL reference"),
    (["grpo.kl_coef=0.1", "rollout.engine=sglang", "rollout.sglang_urls=[http://127.0.0.1:30000]",
      "rollout.placement=colocated"], "set train.reference_placement=host"),
    (["grpo.kl_coef=0", "rollout.engine=sglang", "rollout.sglang_urls=[http://127.0.0.1:30000]",
      "rollout.placement=colocated"], "validation.export=best writes a new best step's weights while the servers"),
])
def test_settings_that_cannot_act_are_refused_at_load(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def test_objective_settings_load():
    config = load_config(None, ["train.ppo_epochs=2", "train.mini_batches=8", "grpo.kl_coef=0.1",
                                "grpo.kl_estimator=k1", "train.reference_placement=host"])
    assert (config.train.ppo_epochs, config.train.mini_batches, config.grpo.kl_estimator) == (2, 8, "k1")
    assert config.fingerprint() == load_config(None, ["train.ppo_epochs=2", "train.mini_batches=8", "grpo.kl_coef=0.1",
                                                      "grpo.kl_estimator=k1"]).fingerprint()


def test_several_steps_with_a_host_reference_on_3x8_equal_single_device(tiny):
    """ppo_epochs=2, mini_batches=2 and k3 KL to a reference in pinned host memory, sharded over a 3x8 mesh
    (mini-batches re-packed for 24 data shards): the state after the batch's four steps agrees with one
    device's."""
    grpo = GRPOSection(kl_coef=0.1, kl_estimator="k3")
    outcomes = []
    for mesh in (None, make_mesh(parse_mesh_spec("3x8"))):
        model = from_pretrained(tiny, mesh=mesh)
        trainer = GRPOTrainer(model, grpo, OptimSection(), logprob_chunk=512, ppo_epochs=2, mini_batches=2,
                              reference_placement="host", micro_batches_per_call=1)
        state = trainer.shard_state(trainer.init_state(model))
        trainer.keep_reference(state.params)
        batch = batch_from_groups(graded_groups(seed=4), grpo, 128, 1, trainer.rows_multiple)
        state, metrics = trainer.update(state, trainer.prepare(state.params, batch))
        outcomes.append((flat(state.params), metrics))
    (single, a), (sharded, b) = outcomes
    np.testing.assert_allclose(sharded, single, atol=1e-6)
    assert b["optimizer_steps"] == 4 and b["kl"] > 0 and b["loss"] == pytest.approx(a["loss"], abs=1e-5)


# ----------------------------------------------------------------------------- the gradient, checked by torch
def test_gradient_matches_torch_on_transformers_qwen3(tiny):
    """The trainer's gradient of the GRPO loss equals torch autograd through transformers' Qwen3, each episode
    run alone (no packing), to 1e-4 of each tensor's largest gradient, for one micro-batch and for several.

    The bound is relative to a tensor's largest entry because entries near zero carry the absolute float32
    noise of both sides (logits agree to ~1e-5), which an element-wise relative test would magnify."""
    grpo = GRPOSection(tis_cap=TIS_CAP)  # token_mean, clip 0.2 / 0.28
    hf = transformers.AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32)
    groups = with_behaviour_near(hf, graded_groups(seed=3, groups=2), seed=3)
    episodes = [t for group in groups for t in group]
    advantages = group_advantages(groups)
    assert (advantages > 0).any() and (advantages < 0).any() and not np.allclose(np.abs(advantages), 1.0)
    torch_loss(hf, episodes, advantages, grpo).backward()
    expected = {name: p.grad.numpy() for name, p in hf.named_parameters()}
    model = from_pretrained(tiny)
    trainer = GRPOTrainer(model, grpo, logprob_chunk=512)
    params = trainer.init_state(model).params
    layouts = hf_layouts(model.config)
    worst = 0.0
    for row_len, micro_rows in [(512, 1), (64, 1)]:
        batch = batch_from_groups(groups, grpo, row_len, micro_rows)
        assert (batch.shape[0] == 1) == (row_len == 512)
        grads, sums = trainer.gradients(params, arrays(batch), jnp.float32(batch.denominator))
        truncated = float(sums["tis_truncated"]) / float(sums["tokens"])
        assert 0.1 < truncated < 0.5 and float(sums["tis_weight"]) != float(sums["tokens"])
        compared = set()
        for path, layout in layouts.items():
            grad = np.asarray(functools.reduce(operator.getitem, path, grads))
            for index in np.ndindex(*layout.stack_shape):
                name = layout.names[index]
                got, want = layout.to_hf(grad[index] if index else grad), expected[name]
                error = np.abs(got - want).max() / np.abs(want).max()
                assert error < 1e-4, (name, error)
                worst, compared = max(worst, error), compared | {name}
        assert compared == set(expected)
    print(f"largest gradient difference: {worst:.2e} of the tensor's largest entry")
