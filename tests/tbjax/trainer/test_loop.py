"""The training loop on CPU: a resumed run is bitwise the run that never stopped, and a run writes
checkpoints, metrics and an HF export transformers loads."""

import asyncio
import json

import jax
import numpy as np
import pytest
import transformers

from tbjax.models import from_pretrained
from tbjax.trainer.loop import run_steps
from tbjax.trainer.run_setup import build_run
from tests.tbjax.trainer.loop_support import brief_session, config_for, signal_tasks


def train_for(model_dir, root, steps: int):
    config = config_for(root, steps)
    run = build_run(config, from_pretrained(model_dir), model_dir, tasks=signal_tasks(model_dir))
    asyncio.run(run_steps(run, opener=brief_session))
    return run


def metric_lines(root) -> list[dict]:
    lines = [json.loads(line) for line in (root / "resume" / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in line.items() if not k.startswith("time_") and k != "rollout_tokens_per_s"}
            for line in lines]


@pytest.mark.slow
def test_resume_is_bitwise_the_uninterrupted_run(tiny_dir, tmp_path):
    model_dir = tiny_dir("qwen3")
    straight = train_for(model_dir, tmp_path / "a", 4)
    train_for(model_dir, tmp_path / "b", 2)  # "killed" after step 2 ...
    resumed = train_for(model_dir, tmp_path / "b", 4)  # ... and started again
    assert int(resumed.state.step) == int(straight.state.step)
    for a, b in zip(jax.tree.leaves(straight.state.params), jax.tree.leaves(resumed.state.params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert metric_lines(tmp_path / "a") == metric_lines(tmp_path / "b")  # same tasks, rewards and losses
    assert any(not line["skipped"] for line in metric_lines(tmp_path / "a"))  # real updates happened
    export = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "a" / "resume" / "export" / "v4")
    assert export.config.model_type == "qwen3"
