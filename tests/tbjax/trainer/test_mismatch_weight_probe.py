"""The mismatch watch and the weight probe through the loop on a tiny Qwen3 with the real embedded engine: every step
logs the engine-vs-trainer gap's max and the mismatch KL, the alarm fires when an engine samples from other
weights, and a publish whose weights do not arrive fails the step loudly (tbjax.trainer.mismatch,
tbjax.trainer.weight_probe)."""

import asyncio
import json
import logging

import jax
import numpy as np
import pytest

from tbjax.config import load_config
from tbjax.models import from_pretrained
from tbjax.sections.training import GRPOSection
from tbjax.trainer.backends.embedded_backend import engine_model
from tbjax.trainer.loop import run_steps
from tbjax.trainer.mismatch import MismatchAlarm, MismatchError, MismatchMeter, mismatch_sums
from tbjax.trainer.objective import OLD_LOGPROBS
from tbjax.trainer.packing import STALE, batch_from_groups
from tbjax.trainer.run_setup import build_run
from tbjax.trainer.update import GRPOTrainer, PreparedBatch
from tbjax.trainer.weight_probe import WeightProbe, WeightProbeError
from tests.tbjax.trainer.loop_support import brief_session, config_for, signal_tasks
from tests.tbjax.trainer.support import synthetic_groups


def configured(root, steps: int, **train):
    """The tiny run of loop_support with train.* settings changed."""
    config = config_for(root, steps)
    return config.model_copy(update={"train": config.train.model_copy(update=train)})


def perturbed_engine_model(trainer, params, *, copy=False):
    """What the engine gets when a weight sync goes wrong: every weight off by 0.01."""
    return engine_model(trainer, jax.tree.map(lambda x: x + 0.01, params), copy=copy)


def run_loop(model_dir, config):
    run = build_run(config, from_pretrained(model_dir), model_dir, tasks=signal_tasks(model_dir))
    asyncio.run(run_steps(run, opener=brief_session))
    return [json.loads(line) for line in (config.run.directory / "metrics.jsonl").read_text().splitlines()]


def trained_lines(lines: list[dict]) -> list[dict]:
    trained = [line for line in lines if not line["skipped"]]
    assert trained, "no step trained: the test needs an informative group"
    return trained


@pytest.mark.slow
def test_steps_log_the_mismatch_and_pass_the_weight_probe(tiny_dir, tmp_path):
    # two optimizer steps per batch: the meter reads the update's old log-probs (no forward pass of its own)
    config = configured(tmp_path, 2, mismatch_alarm=1e-3, mismatch_action="fail", mini_batches=2)
    for line in trained_lines(run_loop(tiny_dir("qwen3"), config)):
        # float32 engine and trainer: the same policy up to numerics, so no alarm
        assert 0 <= line["logprob_gap"] <= line["logprob_gap_max"] < 1e-3
        assert 0 <= line["mismatch_kl"] < 1e-6 and line["mismatch_alarm"] is False
        assert line["weight_probe_max_diff"] <= 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("action", ["warn", "fail"])
def test_the_alarm_fires_when_the_engine_samples_other_weights(tiny_dir, tmp_path, monkeypatch, caplog, action):
    # the engine starts perturbed, every publish perturbs it again
    monkeypatch.setattr("tbjax.trainer.backends.embedded_backend.engine_model", perturbed_engine_model)
    # warn: two optimizer steps per batch (the meter reads the update's old log-probs); fail: one (its own pass)
    config = configured(tmp_path, 2, mismatch_alarm=1e-3, mismatch_action=action, weight_probe=False,
                        mini_batches=2 if action == "warn" else 1)
    if action == "fail":
        with pytest.raises(MismatchError, match=r"step \d: engine/trainer log-prob mismatch mismatch_kl"):
            run_loop(tiny_dir("qwen3"), config)
        return
    with caplog.at_level(logging.WARNING, logger="tbjax.trainer.mismatch"):
        lines = trained_lines(run_loop(tiny_dir("qwen3"), config))
    assert all(line["mismatch_alarm"] and line["mismatch_kl"] > 1e-3 for line in lines)
    warned = [r.getMessage() for r in caplog.records if "log-prob mismatch mismatch_kl" in r.getMessage()]
    assert [int(m.split(":")[0].removeprefix("step ")) for m in warned] == [line["step"] for line in lines]


@pytest.mark.slow
def test_a_publish_whose_weights_do_not_arrive_fails_the_step(tiny_dir, tmp_path, monkeypatch):
    model_dir = tiny_dir("qwen3")
    config = configured(tmp_path, 2)
    run = build_run(config, from_pretrained(model_dir), model_dir, tasks=signal_tasks(model_dir))
    monkeypatch.setattr("tbjax.trainer.backends.embedded_backend.engine_model", perturbed_engine_model)  # started right
    with pytest.raises(WeightProbeError, match=r"weight version \d: engine replica embedded scores the weight probe "
                                              r"up to [\d.]+ away from the trainer \(tolerance 0\.0001"):
        asyncio.run(run_steps(run, opener=brief_session))


def test_a_replica_on_another_version_fails_the_probe(tiny_dir):
    from tbjax.engine.jax_engine import JaxEngine

    model = from_pretrained(tiny_dir("qwen3"))
    trainer = GRPOTrainer(model)
    params = trainer.init_state(model).params
    probe = WeightProbe(trainer, model.config.vocab_size, 1e-4)
    probe.expect(params, "3")
    engine = JaxEngine(trainer.model_for(params), slots=1, max_len=64, weight_version="2")

    async def verify():
        try:
            return await probe.verify(engine)
        finally:
            await engine.close()
    with pytest.raises(WeightProbeError, match="weight version 3 was published, but engine replica embedded "
                                              "serves version 2"):
        asyncio.run(verify())


def test_mismatch_sums_leave_out_untrained_and_unknown_tokens():
    trainer = np.asarray([-1.0, -2.0, -3.0, -4.0], np.float32)
    behaviour = np.asarray([-1.5, -1.8, np.nan, -9.0], np.float32)
    mask = np.asarray([1, 1, 1, 0])
    sums = jax.device_get(mismatch_sums(trainer, behaviour, mask))
    log_ratio = np.asarray([0.5, -0.2])  # trainer - engine on the two trained tokens with a behaviour log-prob
    assert float(sums["gap_max"]) == pytest.approx(0.5)
    assert float(sums["k3"]) == pytest.approx(np.sum(np.expm1(log_ratio) - log_ratio), rel=1e-6)
    assert float(sums["tokens"]) == 2


def test_the_alarm_compares_its_metric_and_names_the_step(caplog):
    metrics = {"logprob_gap": 0.01, "logprob_gap_max": 0.4, "mismatch_kl": 2e-4}
    assert not MismatchAlarm(1e-3).check(metrics, 7)
    with caplog.at_level(logging.WARNING, logger="tbjax.trainer.mismatch"):
        assert MismatchAlarm(0.3, "logprob_gap_max").check(metrics, 7)
    assert "step 7: engine/trainer log-prob mismatch logprob_gap_max 0.4 is over the alarm 0.3" in caplog.text
    with pytest.raises(MismatchError, match="step 8: .* logprob_gap 0.01 is over the alarm 0.005"):
        MismatchAlarm(0.005, "logprob_gap", "fail").check(metrics, 8)


@pytest.mark.parametrize("old_logprobs", [False, True])  # the meter's own forward pass; the update's old log-probs
def test_stale_tokens_are_measured_apart_from_the_fresh_ones(tiny_dir, old_logprobs):
    """A batch trained beside the rollouts: its fresh episodes' behaviour log-probs are the trainer's own (a
    perfect publish), its stale ones' 0.5 higher (sampled before the last update). The watch sees no mismatch on
    the fresh tokens and reports the stale ones' gap apart."""
    model = from_pretrained(tiny_dir("qwen3"))
    trainer = GRPOTrainer(model, logprob_chunk=512)
    state = trainer.init_state(model)
    groups = synthetic_groups()
    stale = {id(t) for group in groups for t in group[:2]}
    packed = batch_from_groups(groups, GRPOSection(), 128, 1, is_stale=lambda t: id(t) in stale)
    assert packed is not None and 0 < packed.arrays[STALE].sum() < packed.arrays["mask"].sum()
    own = np.asarray(trainer.logprobs(state.params, packed))
    packed.arrays["behaviour_logprobs"] = np.where(packed.arrays["mask"] != 0,
                                                   own + 0.5 * packed.arrays[STALE], 0.0).astype(np.float32)
    if old_logprobs:
        packed.arrays[OLD_LOGPROBS] = own
    metrics = MismatchMeter(trainer)(state.params, PreparedBatch([packed]))
    assert metrics["logprob_gap_max"] < 1e-5 and metrics["mismatch_kl"] < 1e-9
    assert metrics["logprob_gap_max_stale"] == pytest.approx(0.5, abs=1e-5)
    assert metrics["mismatch_kl_stale"] == pytest.approx(np.expm1(-0.5) + 0.5, rel=1e-4)  # k3 at log ratio -0.5


def test_an_alarm_on_the_updates_gap_over_every_token_is_refused_beside_the_rollouts():
    with pytest.raises(ValueError, match="alarm on mismatch_kl or logprob_gap_max"):
        load_config(overrides=["rollout.max_staleness=1", "train.mismatch_alarm=0.01",
                               "train.mismatch_alarm_metric=logprob_gap"])
