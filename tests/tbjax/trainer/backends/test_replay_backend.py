"""A third rollout backend admitted by its own file alone (tbjax/trainer/backends/replay_backend.py and its name
in the engine Literal): a GRPO step on generations that the embedded engine recorded trains as that step did."""

import asyncio
import dataclasses
import json

import pytest

from rollout.engines.protocol import Generation
from tbjax.models import from_pretrained
from tbjax.trainer.backends.replay_backend import RECORDING, ReplayBackend, read_recording
from tbjax.trainer.loop import run_steps
from tbjax.trainer.run_setup import build_run
from tests.tbjax.trainer.loop_support import brief_session, config_for, metric_lines, signal_tasks

# what the two runs share: the batch drawn, its rewards and tokens, and the update they make of it
COMPARED = ("reward_mean", "pass_rate", "groups", "episodes", "completion_tokens", "groups_informative",
            "system_errors", "skipped")


class Recording:
    """An engine that notes every generation, in the order of the requests, beside the engine it wraps."""

    def __init__(self, engine, lines: list[dict]) -> None:
        self.engine, self.lines = engine, lines

    async def generate(self, input_ids, sampling, *, session_id=None) -> Generation:
        line = {"input_ids": list(input_ids)}
        self.lines.append(line)  # request order: a replay answers a shared prompt's requests in this order
        generation = await self.engine.generate(input_ids, sampling, session_id=session_id)
        line.update({k: v for k, v in dataclasses.asdict(generation).items() if k != "cached_tokens"})
        return generation

    def __getattr__(self, name):
        return getattr(self.engine, name)


@pytest.mark.slow
def test_a_grpo_step_on_recorded_generations_trains_as_the_recorded_step(tiny_dir, tmp_path):
    model_dir, recorded = tiny_dir("qwen3"), []
    run = build_run(config_for(tmp_path / "embedded", 1), from_pretrained(model_dir), model_dir,
                    tasks=signal_tasks(model_dir))
    run.backend.engine = Recording(run.backend.engine, recorded)
    asyncio.run(run_steps(run, opener=brief_session))

    config = config_for(tmp_path / "replay", 1, "rollout.engine=replay", "train.weight_probe=false")
    config.run.directory.mkdir(parents=True)
    (config.run.directory / RECORDING).write_text("".join(json.dumps(line) + "\n" for line in recorded))
    run = build_run(config, from_pretrained(model_dir), model_dir, tasks=signal_tasks(model_dir))
    assert isinstance(run.backend, ReplayBackend)
    asyncio.run(run_steps(run, opener=brief_session))

    [embedded], [replayed] = metric_lines(tmp_path / "embedded"), metric_lines(tmp_path / "replay")
    assert embedded["episodes"] == len(recorded) and not embedded["skipped"]
    assert {k: replayed[k] for k in COMPARED} == {k: embedded[k] for k in COMPARED}
    assert replayed["loss"] == pytest.approx(embedded["loss"], rel=1e-6, abs=1e-9)
    assert replayed["grad_norm"] == pytest.approx(embedded["grad_norm"], rel=1e-5)


def test_a_missing_or_malformed_recording_is_refused_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"rollout.engine=replay replays the generations recorded in .*"
                                                r"replay.jsonl, and there is no such file"):
        read_recording(tmp_path / RECORDING)
    (tmp_path / RECORDING).write_text('{"input_ids": [1, 2], "output_ids": [3]}\n')
    with pytest.raises(ValueError, match=r"replay.jsonl:1: not a recorded generation \(KeyError"):
        read_recording(tmp_path / RECORDING)


def test_the_weight_probe_is_refused_with_an_engine_that_cannot_score(tmp_path):
    with pytest.raises(ValueError, match="train.weight_probe: the replay engine cannot score the probe"):
        config_for(tmp_path, 1, "rollout.engine=replay")


def test_a_recorded_generation_without_a_finish_reason_of_the_protocol_is_refused(tmp_path):
    line = {"input_ids": [1], "output_ids": [2], "logprobs": [-0.5], "finish_reason": "eos", "weight_version": "0"}
    (tmp_path / RECORDING).write_text(json.dumps(line) + "\n")
    with pytest.raises(ValueError, match=r"replay.jsonl:1: not a recorded generation .*finish_reason 'eos'"):
        read_recording(tmp_path / RECORDING)
