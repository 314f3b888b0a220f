"""Grading an episode from its final backend state and the agent's replies.

The state check compares one sha256 digest with the task's golden hash (only tables some statement could
have written are re-read). The diff, which costs a golden replay, is computed only when the digests differ,
to explain the failure: every missing row, unexpected row and changed value in any table.
"""

from __future__ import annotations

from collections.abc import Sequence

from envs.domain import Domain
from envs.errors import ConfigError, EnvSystemError
from envs.golden import replay
from envs.judges.llm import LlmJudge
from envs.judges.rules import check_rule
from envs.sandbox import Sandbox
from envs.tasks import Task
from envs.verdict import DiffEntry, Outcome, RubricResult, Verdict


def diff_states(expected: Sandbox, actual: Sandbox) -> list[DiffEntry]:
    """Differences over the graded columns of every table whose digests disagree, in key order."""
    wanted, got = expected.table_digests(), actual.table_digests()
    entries: list[DiffEntry] = []
    for table in sorted(t for t in wanted if wanted[t] != got[t]):
        columns = expected.template.tables[table].graded_columns
        want_rows, got_rows = expected.rows(table), actual.rows(table)
        differing = {k for k, v in want_rows.items() if got_rows.get(k) != v}
        differing |= got_rows.keys() - want_rows.keys()
        for key in sorted(differing, key=repr):
            want, have = want_rows.get(key), got_rows.get(key)
            if have is None:
                entries.append(DiffEntry(change="missing_row", table=table, key=list(key),
                                         expected=dict(zip(columns, want or (), strict=True))))
            elif want is None:
                entries.append(DiffEntry(change="unexpected_row", table=table, key=list(key),
                                         actual=dict(zip(columns, have, strict=True))))
            else:
                entries += [
                    DiffEntry(change="changed_value", table=table, key=list(key), column=column, expected=w, actual=h)
                    for column, w, h in zip(columns, want, have, strict=True) if w != h
                ]
    return entries


async def grade(domain: Domain, task: Task, sandbox: Sandbox, replies: Sequence[str],
                judge: LlmJudge | None = None) -> Verdict:
    """The verdict for `task` given the episode's final `sandbox` and every reply the agent sent the user.
    A judge that fails (`EnvSystemError`) gives a system-error verdict; a task that needs a judge when none is
    configured raises `ConfigError`: every such episode would fail alike, so the run must stop."""
    if task.golden_hash is None:
        raise ValueError(f"task {task.id} is not sealed; load it with envs.load_tasks or envs.loading.seal")
    final_hash = sandbox.state_hash()
    state_matches = final_hash == task.golden_hash
    outcome = _outcome(task, final_hash)
    diff: list[DiffEntry] = []
    if not state_matches:
        golden = replay(domain, task)
        try:
            diff = diff_states(golden, sandbox)
        finally:
            golden.close()
    try:
        rubrics = await _grade_rubrics(task, "\n".join(replies), judge)
    except EnvSystemError as exc:
        return Verdict(task_id=task.id, passed=False, system_error=f"{exc.kind}: {exc}",
                       state_matches=state_matches, outcome=outcome, diff=diff)
    passed = state_matches and all(r.passed for r in rubrics)
    return Verdict(task_id=task.id, passed=passed, state_matches=state_matches, outcome=outcome, diff=diff,
                   rubrics=rubrics)


def _outcome(task: Task, final_hash: str) -> Outcome:
    """Which of the task's reference states the episode ended in (the golden state wins where they coincide)."""
    references: tuple[tuple[Outcome, str | None], ...] = (
        ("golden", task.golden_hash), ("careless", task.careless_hash), ("unchanged", task.initial_hash))
    for outcome, reference in references:
        if final_hash == reference:
            return outcome
    return "other"


async def _grade_rubrics(task: Task, replies: str, judge: LlmJudge | None) -> list[RubricResult]:
    results = []
    for rubric in task.rubrics:
        if rubric.kind != "llm_yes_no":
            results.append(check_rule(rubric, replies))
        elif judge is None:
            raise ConfigError(f"task {task.id} has an llm_yes_no rubric but no judge was configured")
        else:
            results.append(await judge.check(rubric, replies))
    return results
