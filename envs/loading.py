"""Turning domains into graded tasks: generation, golden replay, validation and caching.

Every task is sealed at load time: its golden path is replayed on a fresh sandbox and the resulting state
hash is stored in the task. Any inconsistency (a failing golden call, a duplicate, a reference answer that
misses its own rubric, a kind whose outcome contradicts the state change) raises `InvalidTaskError` here,
loudly, instead of producing a task that can never be passed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from envs.declines import with_decline_rubric
from envs.domain import Domain
from envs.errors import InvalidTaskError
from envs.golden import initial_sandbox, run_golden_path
from envs.judges.rules import check_rule
from envs.precision import with_precision_rubric
from envs.registry import get_domain, known_domains
from envs.tasks import Split, Task, TaskKind
from envs.templates import GenContext

_STATE_CHANGING = {TaskKind.DIRECT, TaskKind.APPROVAL}


def generate(domain: Domain) -> list[Task]:
    """The domain's tasks from its templates (information tasks with their answer-precision rubric, leak tasks
    with their decline rubric), not yet sealed."""
    tasks = []
    for tmpl in domain.templates:
        for variant in range(tmpl.variants):
            draft = tmpl.build(GenContext(domain.name, tmpl, variant, domain.database))
            tasks.append(Task(
                id=f"{domain.name}/{tmpl.name}/{variant:03d}", domain=domain.name, split=tmpl.split,
                kind=tmpl.kind, template=tmpl.name, scenario=draft.scenario, initial_patch=draft.initial_patch,
                golden_path=tuple(draft.golden_path), rubrics=tuple(draft.rubrics),
                reference_answer=draft.reference_answer, violation=draft.violation, note=draft.note,
            ))
    return [with_decline_rubric(with_precision_rubric(domain, task)) for task in tasks]


def seal(domain: Domain, task: Task) -> Task:
    """Replay the golden path, check the task's internal consistency, and record its golden hash."""
    if task.domain != domain.name:
        raise InvalidTaskError(task.id, f"belongs to domain {task.domain!r}, not {domain.name!r}")
    sandbox = initial_sandbox(domain, task)
    initial_hash = sandbox.state_hash()
    run_golden_path(domain, task, sandbox)
    try:
        golden_hash = sandbox.state_hash()
    finally:
        sandbox.close()
    changes_state = initial_hash != golden_hash
    careless_hash = None if task.violation is None else _careless_hash(domain, task, golden_hash)
    if changes_state != (task.kind in _STATE_CHANGING):
        expected = "must change" if task.kind in _STATE_CHANGING else "must leave unchanged"
        raise InvalidTaskError(task.id, f"a {task.kind} task {expected} the state, but its golden path does not")
    for rubric in task.rubrics:
        if rubric.kind != "llm_yes_no" and not check_rule(rubric, task.reference_answer).passed:
            raise InvalidTaskError(task.id, f"reference_answer fails its own rubric {rubric.kind} {rubric.phrases}")
    if task.note is not None and task.note.after not in {c.tool for c in task.golden_path}:
        raise InvalidTaskError(task.id, f"its decision note reads the result of {task.note.after!r}, which its "
                                        "golden path never calls")
    if task.kind in (TaskKind.INFORMATION, TaskKind.LEAK) and not task.rubrics:
        raise InvalidTaskError(task.id, f"a {task.kind} task needs an answer rubric")
    return task.model_copy(update={"golden_hash": golden_hash, "changes_state": changes_state,
                                   "initial_hash": initial_hash, "careless_hash": careless_hash})


def _careless_hash(domain: Domain, task: Task, golden_hash: str) -> str:
    """The state the careless path ends in; it must replay (the backend allows it, only the policy forbids it)
    and fail the task."""
    careless = task.model_copy(update={"golden_path": task.careless_path})
    sandbox = initial_sandbox(domain, careless)
    try:
        run_golden_path(domain, careless, sandbox)
        careless_hash = sandbox.state_hash()
    except InvalidTaskError as exc:
        raise InvalidTaskError(task.id, f"the backend refuses its violation: {exc.problem}") from exc
    finally:
        sandbox.close()
    if careless_hash == golden_hash:
        raise InvalidTaskError(task.id, f"its violation {task.violation} leaves the golden state: a careless agent "
                                        "would pass")
    return careless_hash


def _check_unique(tasks: Iterable[Task]) -> None:
    seen_ids: set[str] = set()
    seen_content: dict[str, str] = {}
    for task in tasks:
        if task.id in seen_ids:
            raise InvalidTaskError(task.id, "duplicate task id")
        seen_ids.add(task.id)
        content = json.dumps(task.model_dump(mode="json", include={"scenario", "initial_patch", "golden_path",
                                                                  "rubrics"}), sort_keys=True)
        if content in seen_content:
            raise InvalidTaskError(task.id, f"same scenario, patch, golden path and rubrics as {seen_content[content]}")
        seen_content[content] = task.id


@cache
def domain_tasks(name: str) -> tuple[Task, ...]:
    """All sealed tasks of one known domain, by name (cached for the process)."""
    domain = get_domain(name)
    tasks = [seal(domain, task) for task in generate(domain)]
    _check_unique(tasks)
    return tuple(tasks)


def load_tasks(domain: str | None = None, split: Split | str | None = None) -> list[Task]:
    """Sealed tasks of one domain (a name or a "module:attr" reference, see envs.registry) or of every known
    domain, optionally of one split."""
    names = [get_domain(domain).name] if domain else list(known_domains())
    wanted = Split(split) if split else None
    return [t for name in names for t in domain_tasks(name) if wanted is None or t.split == wanted]


def task_records(path: str | Path) -> list[Task]:
    """The tasks of a JSONL file (one Task per line) as written, not sealed: what a caller may filter before
    paying for sealing, or refuse by id before their domains must be known."""
    tasks = []
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            tasks.append(Task.model_validate_json(line))
        except ValueError as exc:
            raise InvalidTaskError(f"{path}:{number}", f"not a valid Task record: {exc}") from exc
    return tasks


def seal_tasks(tasks: Iterable[Task]) -> list[Task]:
    """`tasks` sealed against the domains their `Task.domain` names (built-in, installed, or loaded by
    reference in this process), each id and content once."""
    sealed = [seal(get_domain(task.domain), task) for task in tasks]
    _check_unique(sealed)
    return sealed


def read_jsonl(path: str | Path) -> list[Task]:
    """Tasks from a JSONL file (one Task per line), sealed against their domains."""
    return seal_tasks(task_records(path))


def write_jsonl(tasks: Iterable[Task], path: str | Path) -> None:
    Path(path).write_text("".join(task.model_dump_json() + "\n" for task in tasks))
