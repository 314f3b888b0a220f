"""GRPO on τ²-bench's train split: a test-split task never reaches training, whichever way it is given, and one
step of the tiny policy on two retail train tasks draws them, plays them on τ²'s real environments (its venv
named by TBJAX_TAU2_PYTHON; skipped otherwise) against the directed user endpoint, and records their rewards.
The tiny policy's replies pass nothing; what is checked is what the run did."""

import asyncio
import json

import pytest
import yaml
from rich.console import Console

from envs.tau2.directed_user import DirectedUser
from envs.tau2.tasks import Tau2Case
from rollout.task_choice import TaskChoiceError
from tbjax import train
from tbjax.models import from_pretrained
from tbjax.trainer.loop import run_steps
from tbjax.trainer.run_setup import build_run
from tests.tau2_support import tau2_python
from tests.tbjax.tau2_run_support import tau2_run_config, tau2_tree

TRAIN_IDS = ["tau2/retail/train/0", "tau2/retail/train/1"]
TEST_ID = "tau2/retail/test/5"
# one short agent turn per episode, after τ²'s retail prompt (its policy and tool schemas: 6,248 tokens of the
# tiny policy's tokenizer), prefilled in a few chunks
TINY_RUN = ["train.steps=1", "train.row_len=8192", "rollout.max_len=8192", "rollout.prefill_chunk=2048",
            "episode.token_budget=8192", "episode.max_turns=1", "episode.max_tokens_per_turn=16",
            "groups.groups=2", "groups.group_size=2", "groups.max_extra_rounds=0"]


def case(split: str, tau2_id: str) -> Tau2Case:
    return Tau2Case(domain="retail", tau2_id=tau2_id, split=split, instructions="Return an order.",  # type: ignore[arg-type]
                    reward_basis=("DB",), actions=(), communicate_info=())


def test_build_run_refuses_a_test_split_task_naming_it(tiny_dir, tmp_path):
    """Tasks handed to build_run directly (tests, custom curricula) are checked too: no venv is needed."""
    model_dir = tiny_dir("qwen3")
    config = tau2_run_config(tmp_path, tau2_tree(), [f"run.root={tmp_path}"])
    tasks = [case("train", "0").task, case("test", "5").task]
    with pytest.raises(TaskChoiceError, match=f"benchmark task {TEST_ID} .*is evaluation-only"):
        build_run(config, from_pretrained(model_dir), model_dir, tasks=tasks)


def test_a_selection_naming_a_test_split_task_is_refused_before_any_model_loads(tmp_path, monkeypatch):
    selected = tmp_path / "selected.yaml"
    selected.write_text(yaml.safe_dump({"tasks": [TRAIN_IDS[0], TEST_ID]}))
    tau2_run_config(tmp_path, tau2_tree(python=tau2_python()), [f"tasks.selected={selected}"])
    recorder = Console(record=True, width=400)
    monkeypatch.setattr(train, "console", recorder)
    assert train.main(["--config", str(tmp_path / "tau2.yaml"), f"tasks.selected={selected}"]) == 2
    assert f"not train-split tasks of the configured domains and templates (e.g. {TEST_ID})" in recorder.export_text()


@pytest.mark.slow
def test_one_grpo_step_plays_tau2_train_tasks_and_records_their_rewards(tiny_dir, tmp_path):
    python = tau2_python()
    model_dir = tiny_dir("qwen3")
    selected = tmp_path / "selected.yaml"
    selected.write_text(yaml.safe_dump({"tasks": TRAIN_IDS}))
    with DirectedUser() as user:
        config = tau2_run_config(tmp_path, tau2_tree(python=python, user_url=user.base_url),
                                 [f"run.root={tmp_path}", f"tasks.selected={selected}", *TINY_RUN])
        run = build_run(config, from_pretrained(model_dir), model_dir)
        assert [t.id for t in run.tasks] == TRAIN_IDS
        asyncio.run(run_steps(run))  # the configured opener: a τ² suite whose user is the directed endpoint
    step = json.loads((tmp_path / "default" / "metrics.jsonl").read_text().splitlines()[0])
    assert step["step"] == 1 and step["episodes"] == 4 and step["system_errors"] == {}
    assert sorted(group["task"] for group in step["groups"]) == TRAIN_IDS  # both drawn, both scored
    assert step["pass_rate"] is not None  # every episode graded by τ²'s worker
    assert (tmp_path / "default" / "export" / "v1" / "model.safetensors").is_file()
