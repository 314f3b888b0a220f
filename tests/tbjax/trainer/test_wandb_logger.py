"""The W&B logger (train.loggers, tbjax.trainer.wandb_sink) offline, through the real loop: the run directory
holds one W&B run named after the tbjax run, whose config is the run's config and whose history is
metrics.jsonl's scalars step by step; a resumed run continues the same W&B run. Settings that cannot act are
refused."""

import json
import math

import pytest

from tbjax.config import load_config
from tbjax.trainer.metrics_log import scalars
from tests.tbjax.trainer.loop_support import config_for, train_for
from tests.tbjax.trainer.wandb_support import offline_run

W_AND_B = ("train.loggers=[jsonl,tensorboard,wandb]", "train.wandb_mode=offline", "train.wandb_project=tbjax-test")


@pytest.mark.slow
def test_an_offline_run_logs_the_config_and_every_steps_metrics(tiny_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "elsewhere"))  # the run's dir setting must win
    model_dir = tiny_dir("qwen3")
    train_for(model_dir, tmp_path, 1, *W_AND_B)
    train_for(model_dir, tmp_path, 2, *W_AND_B)  # resumed: the same W&B run goes on
    run = offline_run(tmp_path / "resume")
    run_id = (tmp_path / "resume" / "wandb_id").read_text()
    assert run["starts"] == [("tbjax-test", "resume", run_id)] * 2
    assert run["config"] == config_for(tmp_path, 2, *W_AND_B).model_dump(mode="json")
    lines = (tmp_path / "resume" / "metrics.jsonl").read_text().splitlines()
    expected = {record["step"]: dict(scalars(record)) for record in map(json.loads, lines)}
    assert sorted(run["history"]) == [1, 2]
    for step, values in expected.items():
        assert run["history"][step].keys() == values.keys()
        assert all(math.isclose(run["history"][step][k], v, rel_tol=1e-12) for k, v in values.items())


def test_settings_that_cannot_act_are_refused() -> None:
    with pytest.raises(ValueError, match="keep jsonl in the list"):
        load_config(overrides=["train.loggers=[tensorboard]"])
    with pytest.raises(ValueError, match="train.wandb_mode acts only with wandb in train.loggers"):
        load_config(overrides=["train.wandb_mode=offline"])
