"""Task choosing, the one way the GRPO loop, the pipeline, `rollout.evaluate` and `rollout.select` pick tasks:
held-out draws spread over templates, domains that select nothing named with the fix, and benchmark tasks
refused wherever tasks are chosen to be trained on or selected from (the select command included)."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import pytest

from envs import Split, Task, load_tasks, write_jsonl
from rollout import select as select_cli
from rollout.task_choice import (
    TaskChoiceError,
    TaskSource,
    command_tasks,
    split_heldout,
    split_tasks,
    spread_over_templates,
)


def test_heldout_draws_spread_evenly_over_templates_and_repeat_by_seed() -> None:
    pool = load_tasks("library", Split.TRAIN)
    templates = {t.template for t in pool}
    drawn = spread_over_templates(pool, 2 * len(templates), seed=3)
    assert Counter(t.template for t in drawn) == {template: 2 for template in templates}
    assert drawn == spread_over_templates(pool, 2 * len(templates), seed=3)
    assert drawn != spread_over_templates(pool, 2 * len(templates), seed=4)
    assert [t.id for t in drawn] == sorted(t.id for t in drawn)


def test_heldout_instances_never_train_and_heldout_templates_are_new() -> None:
    source = TaskSource(domains=["library"])
    train, held = split_heldout(source, "instances", 6, seed=0)
    assert len(held) == 6 and not {t.id for t in train} & {t.id for t in held}
    train, held = split_heldout(source, "templates", 6, seed=0)
    assert {t.split for t in held} == {Split.HELDOUT} and not {t.template for t in train} & {t.template for t in held}


def test_a_domain_that_selects_nothing_is_named_for_every_split() -> None:
    for split in (Split.TRAIN, Split.HELDOUT):
        with pytest.raises(TaskChoiceError, match=rf"tasks.domains names \['airline'\], which have no "
                                                  rf"{split.value}-split tasks in the known domains; choose from"):
            split_tasks(TaskSource(domains=["airline"]), split)
    with pytest.raises(TaskChoiceError, match=r"--domain names \['airline'\]"):
        command_tasks(None, ["airline"], None, None, for_training=False)


def test_the_select_command_refuses_a_benchmark_candidate_before_any_trial(tmp_path: Path, caplog) -> None:
    """The loop refused benchmark tasks with an error and selection dropped them quietly; now choosing them
    for selection is the same error, raised before an engine is asked for anything."""
    task = load_tasks("library", Split.TRAIN)[0]
    benchmark: Task = task.model_copy(update={"id": "thinkingbox/retail/001", "domain": "thinkingbox/retail"})
    candidates = tmp_path / "candidates.jsonl"
    write_jsonl([task, benchmark], candidates)
    with caplog.at_level(logging.ERROR):
        assert select_cli.main(["--engine", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                                "--tasks", str(candidates), "--out", str(tmp_path / "out")]) == 2
    assert "benchmark task thinkingbox/retail/001 (in --tasks" in caplog.text and "evaluation-only" in caplog.text
    assert not (tmp_path / "out" / "trials.jsonl").exists()
