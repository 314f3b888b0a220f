"""The pipeline with tasks.suite=tau2: the held-out tasks are τ²-bench's test split and GRPO's pool its train
split, never the other way, and the evaluation stages grade with τ²'s own evaluator (τ²'s venv named by
TBJAX_TAU2_PYTHON lists the tasks; skipped otherwise)."""

import asyncio

from envs import Split
from envs.tau2 import is_heldout_task
from tbjax.pipeline.results import heldout_description
from tbjax.pipeline.stages import grpo_tasks, heldout_split
from tbjax.trainer.suite_setup import configured_opener
from tests.tau2_support import tau2_python
from tests.tbjax.tau2_run_support import tau2_run_config, tau2_tree


def test_the_held_out_tasks_are_the_test_split_and_grpo_draws_from_the_train_split(tmp_path):
    config = tau2_run_config(tmp_path, tau2_tree(python=tau2_python()), ["evaluate.tasks=6"])
    train_pool, heldout = heldout_split(config)
    assert len(heldout) == 6 and all(is_heldout_task(t.id) and t.split == Split.HELDOUT for t in heldout)
    assert len(train_pool) == 74 and all(t.split == Split.TRAIN and "/train/" in t.id for t in train_pool)
    assert grpo_tasks(config, heldout) == train_pool  # every train-split task, no test-split one
    assert heldout_description(config) == "the test split of τ²-bench (tasks never selected from or trained on)"


def test_the_evaluation_stages_grade_with_tau2s_evaluator_and_training_as_configured(tmp_path):
    config = tau2_run_config(tmp_path, tau2_tree(python=tau2_python()))

    async def grading(evaluation):
        async with configured_opener(config, evaluation) as opener:
            return opener.__self__.config.grading  # the suite's bound `open`

    assert (asyncio.run(grading(False)), asyncio.run(grading(True))) == ("fast", "tau2")
