"""Training on your own tasks: `tasks.file`, a JSONL of envs.Task records, replaces the domains' own tasks for
training and for the pipeline's held-out split, under the same filters (tasks.domains, tasks.templates,
tasks.selected). The tasks belong to a domain defined outside this repository, in a temporary package."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from envs import Split, Task, load_tasks, write_jsonl
from rollout.task_choice import MissingTaskInput, TaskChoiceError, training_tasks
from tbjax.config import load_config
from tbjax.pipeline.stages import heldout_split
from tbjax.trainer.suite_setup import session_opener
from tests.envs.external_domain_support import NAME, REFERENCE, external_domain, forget_references, golden_verdict

TRAIN_IDS = [f"{NAME}/ask_price/{i:03d}" for i in range(3)]


def chosen(*overrides: str) -> list[Task]:
    """The tasks GRPO would draw from under the default config with `overrides`."""
    return training_tasks(load_config(overrides=list(overrides)).tasks.source())


@pytest.fixture
def shop_tasks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A JSONL of tiny_shop's tasks (3 train, 2 heldout), written by a process that loaded the domain by
    reference; training then starts as a fresh process would, not knowing the domain yet."""
    with external_domain(tmp_path, monkeypatch):
        path = tmp_path / "tasks.jsonl"
        write_jsonl(load_tasks(REFERENCE), path)
        forget_references(monkeypatch)
        yield path


def test_training_draws_the_train_split_of_the_file_and_opens_its_sessions(shop_tasks: Path) -> None:
    config = load_config(overrides=[f"tasks.file={shop_tasks}", f"tasks.domains=[{REFERENCE}]",
                                    "tasks.templates=null"])
    tasks = training_tasks(config.tasks.source())
    assert [t.id for t in tasks] == TRAIN_IDS and all(t.golden_hash for t in tasks)
    verdict = asyncio.run(golden_verdict(tasks[0], session_opener(config)))
    assert verdict.passed, verdict.report()


def test_the_file_combines_with_templates_selection_and_the_heldout_split(shop_tasks: Path, tmp_path: Path) -> None:
    selected = tmp_path / "selected.yaml"
    selected.write_text(f"tasks: [{TRAIN_IDS[2]}]\n")
    source = [f"tasks.file={shop_tasks}", f"tasks.domains=[{REFERENCE}]"]
    assert [t.id for t in chosen(*source, "tasks.templates=[ask_price]", f"tasks.selected={selected}")] == [
        TRAIN_IDS[2]]
    train, held = heldout_split(load_config(overrides=[*source, "tasks.templates=null", "evaluate.heldout=templates",
                                                       "evaluate.tasks=2"]))
    assert [t.id for t in train] == TRAIN_IDS
    assert [t.id for t in held] == [f"{NAME}/ask_name/000", f"{NAME}/ask_name/001"]


def test_an_installed_domain_needs_no_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with external_domain(tmp_path, monkeypatch, entry_points=(f"{NAME} = {REFERENCE}",)):
        path = tmp_path / "tasks.jsonl"
        write_jsonl(load_tasks(NAME), path)
        config = load_config(overrides=[f"tasks.file={path}", "tasks.domains=null", "tasks.templates=null"])
        assert [t.id for t in training_tasks(config.tasks.source())] == TRAIN_IDS


def test_file_mistakes_are_named_with_their_fix(shop_tasks: Path, tmp_path: Path) -> None:
    everything = ["tasks.domains=null", "tasks.templates=null"]
    file = re.escape(str(shop_tasks))
    with pytest.raises(MissingTaskInput, match=r"tasks.file: .*nowhere.jsonl does not exist; write your tasks"):
        chosen(f"tasks.file={tmp_path / 'nowhere.jsonl'}", *everything)
    with pytest.raises(TaskChoiceError, match=rf"tasks.file {file}: unknown domain '{NAME}'.*'module:attr'"):
        chosen(f"tasks.file={shop_tasks}", *everything)
    with pytest.raises(TaskChoiceError, match=r"tasks.domains names \['library'\], which have no train-split "
                                              rf"tasks in tasks.file {file}; choose from \['{NAME}'\]"):
        chosen(f"tasks.file={shop_tasks}", f"tasks.domains=[{REFERENCE}, library]", "tasks.templates=null")
    # refused by id, though held out (as ThinkingBox's tasks are) and before its domain would have to be known
    benchmark = tmp_path / "benchmark.jsonl"
    task = Task.model_validate_json(shop_tasks.read_text().splitlines()[0])
    write_jsonl([task, task.model_copy(update={"id": "thinkingbox/retail/001", "domain": "thinkingbox/retail",
                                               "split": Split.HELDOUT})], benchmark)
    with pytest.raises(TaskChoiceError,
                       match=r"benchmark task thinkingbox/retail/001 \(in tasks.file .*\) is evaluation-only"):
        chosen(f"tasks.file={benchmark}", *everything)
