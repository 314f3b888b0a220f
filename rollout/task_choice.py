"""Which tasks a run trains, selects and evaluates on, chosen one way for the GRPO loop, the default
pipeline, `rollout.evaluate` and `rollout.select`.

A pool is a JSONL file of your own tasks (sealed against the domains their `domain` field names), the
known domains' tasks of one split, or an external suite's tasks (`TaskSource.pool`, e.g. τ²-bench's). The
same filters then apply in this order: domains, then (train split) templates, then a selection's ids; a
setting that selects nothing is an error naming what it could have chosen. Held-out tasks are drawn spread
evenly over templates. A benchmark task (an id a suite of envs.suite_registry claims: every task of the
evaluation-only ThinkingBox-Bench, τ²-bench's test split) is refused wherever tasks are chosen to be trained on
or selected from, and allowed where they are only evaluated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import yaml

from envs import DomainError, InvalidTaskError, Split, Task, load_tasks
from envs.loading import seal_tasks, task_records
from envs.registry import domain_name
from envs.suite_registry import SUITES


class TaskChoiceError(ValueError):
    """A task setting that chooses nothing usable; the message names the setting and the fix."""


class MissingTaskInput(TaskChoiceError):
    """A file a task setting names is not on this machine (a cluster's path, planned with --dry-run on a laptop)."""


@dataclasses.dataclass(frozen=True)
class SettingNames:
    """What error messages call each setting: a config's keys or a command's flags."""

    file: str = "tasks.file"
    domains: str = "tasks.domains"
    templates: str = "tasks.templates"
    selected: str = "tasks.selected"


CONFIG_KEYS = SettingNames()
COMMAND_FLAGS = SettingNames(file="--tasks", domains="--domain", templates="--template", selected="--selected")


@dataclasses.dataclass(frozen=True)
class TaskSource:
    """Where tasks come from (`file`, else the known domains) and which to keep (None: no filter). A
    "module:attr" entry of `domains` is loaded first, so that its tasks load and their sessions open."""

    file: str | Path | None = None
    domains: Sequence[str] | None = None
    templates: Sequence[str] | None = None
    selected: str | Path | None = None  # a selected.yaml of task ids (`rollout.select`)
    names: SettingNames = CONFIG_KEYS
    # an external suite's tasks (e.g. envs.tau2's) in place of the file and the known domains; `domains` then
    # names its tasks' `domain` values as they are
    pool: Sequence[Task] | None = None


@dataclasses.dataclass(frozen=True)
class BenchmarkExclusion:
    """Task ids, id prefixes and predicates (e.g. `envs.thinkingbox.is_benchmark_task`) that mark tasks that
    must never be trained on."""

    ids: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()
    predicates: tuple[Callable[[str], bool], ...] = ()

    def __contains__(self, task_id: object) -> bool:
        return isinstance(task_id, str) and (task_id in self.ids or task_id.startswith(self.prefixes)
                                             or any(predicate(task_id) for predicate in self.predicates))

    def merged(self, ids: Iterable[str] = (), prefixes: Iterable[str] = (),
               predicates: Iterable[Callable[[str], bool]] = ()) -> BenchmarkExclusion:
        return BenchmarkExclusion(self.ids | frozenset(ids), tuple(sorted({*self.prefixes, *prefixes})),
                                  (*self.predicates, *predicates))

    def describe(self) -> dict[str, list[str]]:
        """What a selection manifest records: ids, prefixes and the predicates' qualified names."""
        return {"ids": sorted(self.ids), "prefixes": list(self.prefixes),
                "predicates": [f"{p.__module__}.{p.__qualname__}" for p in self.predicates]}


def benchmark_exclusion() -> BenchmarkExclusion:
    """The benchmark ids every registered suite claims (its `is_benchmark_task`), all of them refused."""
    return BenchmarkExclusion(predicates=tuple(suite.is_benchmark_task for suite in SUITES.values()
                                               if suite.is_benchmark_task is not None))


def refuse_benchmark(tasks: list[Task], where: str, exclusion: BenchmarkExclusion | None = None) -> list[Task]:
    """`tasks`, none of which may be a benchmark task: those are evaluation-only."""
    exclusion = benchmark_exclusion() if exclusion is None else exclusion
    banned = [t.id for t in tasks if t.id in exclusion]
    if banned:
        raise TaskChoiceError(f"benchmark task {banned[0]} (in {where}) is evaluation-only and must never be "
                              "trained on; remove it")
    return tasks


def split_tasks(source: TaskSource, split: Split | None, *, for_training: bool = True) -> list[Task]:
    """The `split` tasks (None: every split, of a file) of the source's domains and, on the train split, of its
    templates; a domain or template that selects none of them is an error. For training, so is a benchmark
    task of either split in a file."""
    names = source.names
    try:
        wanted = None if source.domains is None or source.pool is not None else [
            domain_name(entry) for entry in source.domains]
    except DomainError as error:
        raise TaskChoiceError(f"{names.domains}: {error}") from error
    where = f"{names.file} {source.file}" if source.file else "the known domains"
    if source.pool is not None:  # a suite's held-out split is evaluation's; any other split must be trainable
        wanted, where = source.domains and list(source.domains), "the suite's tasks"
        every = [task for task in source.pool if split is None or task.split == split]
        if for_training and split != Split.HELDOUT:
            refuse_benchmark(every, where)
    elif source.file:  # refused there already, by id, before the tasks' domains must be known
        every = _file_tasks(Path(source.file), split, for_training, names)
    else:
        every = load_tasks(split=split)
        if for_training:
            refuse_benchmark(every, where)
    unknown = sorted(set(wanted or ()) - {task.domain for task in every})
    if unknown:
        kind = f"{split.value}-split tasks" if split else "tasks"
        raise TaskChoiceError(f"{names.domains} names {unknown}, which have no {kind} in {where}; choose from "
                              f"{sorted({task.domain for task in every})}, or set {names.domains}=null")
    tasks = [task for task in every if wanted is None or task.domain in wanted]
    if split == Split.TRAIN and source.templates is not None:
        known = {task.template for task in tasks}
        unknown = sorted(set(source.templates) - known)
        if unknown:
            raise TaskChoiceError(f"{names.templates} names {unknown}, not train-split templates of the domains "
                                  f"{source.domains or 'all'}; choose from {sorted(known)}, or set "
                                  f"{names.templates}=null")
        tasks = [task for task in tasks if task.template in source.templates]
    return tasks


def _file_tasks(path: Path, split: Split | None, for_training: bool, names: SettingNames) -> list[Task]:
    """The file's `split` tasks, sealed against their domains; for training, a benchmark task of either split
    is refused before its domain would have to be known."""
    if not path.is_file():
        raise MissingTaskInput(f"{names.file}: {path} does not exist; write your tasks there (envs.write_jsonl, "
                               f"one Task per line), or drop {names.file} to use the domains' own tasks")
    try:
        records = task_records(path)
        if for_training:
            refuse_benchmark(records, f"{names.file} {path}")
        return seal_tasks(task for task in records if split is None or task.split == split)
    except (DomainError, InvalidTaskError) as error:
        raise TaskChoiceError(f"{names.file} {path}: {error}") from error


def training_tasks(source: TaskSource) -> list[Task]:
    """The tasks GRPO draws from: the train split's, narrowed to the selection's ids when one is given."""
    tasks = split_tasks(source, Split.TRAIN)
    if source.selected:
        tasks = _selected(tasks, Path(source.selected), source.names)
    if not tasks:
        n = source.names
        raise TaskChoiceError(f"no training tasks: check {n.file}, {n.domains}, {n.templates} and {n.selected}")
    return tasks


def _selected(tasks: list[Task], path: Path, names: SettingNames) -> list[Task]:
    if not path.is_file():
        raise MissingTaskInput(f"{names.selected}: {path} does not exist; write it with `python -m "
                               f"rollout.select`, or drop {names.selected} to train on every task")
    wanted = yaml.safe_load(path.read_text())
    wanted = wanted.get("tasks", wanted) if isinstance(wanted, dict) else wanted
    by_id = {t.id: t for t in tasks}
    missing = [i for i in wanted if i not in by_id]
    if missing:
        raise TaskChoiceError(f"{path} names {len(missing)} tasks that are not train-split tasks of the "
                              f"configured domains and templates (e.g. {missing[0]}); re-run rollout.select")
    return [by_id[i] for i in wanted]


def command_tasks(file: Path | None, domains: Sequence[str] | None, split: str | None, limit: int | None, *,
                  for_training: bool) -> list[Task]:
    """The tasks a command's --tasks, --domain, --split and --limit flags choose: the file's (of every split
    unless --split is given) or the domains' tasks of --split (default heldout), in order, the first --limit."""
    split = split or (None if file else Split.HELDOUT.value)
    tasks = split_tasks(TaskSource(file=file, domains=domains, names=COMMAND_FLAGS),
                        None if split is None else Split(split), for_training=for_training)
    tasks = tasks if limit is None else tasks[:limit]
    if not tasks:
        raise TaskChoiceError("no tasks chosen; check --domain, --split, --tasks and --limit")
    return tasks


def spread_over_templates(pool: list[Task], count: int, seed: int) -> list[Task]:
    """`count` tasks of `pool`, drawn with `seed`, spread evenly over templates (round robin over each
    domain's templates), in id order."""
    rng = np.random.default_rng(seed)
    by_template: dict[tuple[str, str], list[Task]] = {}
    for task in pool:
        by_template.setdefault((task.domain, task.template), []).append(task)
    queues = [[ts[i] for i in rng.permutation(len(ts))] for _, ts in sorted(by_template.items())]
    chosen: list[Task] = []
    while len(chosen) < min(count, len(pool)):
        for queue in queues:
            if queue and len(chosen) < count:
                chosen.append(queue.pop())
    return sorted(chosen, key=lambda t: t.id)


HeldOut = Literal["templates", "instances"]


def split_heldout(source: TaskSource, heldout: HeldOut, count: int, seed: int) -> tuple[list[Task], list[Task]]:
    """(tasks to train on, `count` held-out tasks to evaluate on). "templates" holds out the heldout split
    (templates never trained on: new tools, new requests); "instances" holds out train-split tasks (new
    customers, ids and values of the trained templates), which then appear in no demonstration, selection or
    GRPO batch."""
    train = split_tasks(source, Split.TRAIN)
    if not count:
        return train, []
    if heldout == "templates":
        return train, spread_over_templates(heldout_split_tasks(source), count, seed)
    return carve(train, count, seed)


def carve(pool: list[Task], count: int, seed: int) -> tuple[list[Task], list[Task]]:
    """(`pool` less the carved tasks, `count` tasks of it spread over its templates): how held-out instances
    and a validation split are set apart from what trains."""
    carved = spread_over_templates(pool, count, seed)
    ids = {t.id for t in carved}
    return [t for t in pool if t.id not in ids], carved


def heldout_split_tasks(source: TaskSource) -> list[Task]:
    """The heldout split's tasks of the source's domains (no benchmark task: the pipeline trains beside them)."""
    return split_tasks(source, Split.HELDOUT)


def without_heldout(tasks: list[Task], heldout: list[Task]) -> list[Task]:
    """`tasks` less the held-out ones, so that whatever chose the training tasks (a selection, a selected.yaml
    or every train-split task), no held-out task is trained on; an empty remainder is an error."""
    held = {t.id for t in heldout}
    kept = [t for t in tasks if t.id not in held]
    if not kept:
        raise TaskChoiceError("every training task is held out for evaluation: lower evaluate.tasks or add tasks")
    return kept
