"""A demonstrator that slips: every slip a task admits, played through the real episode loop (real sandboxes,
MCP sessions, scripted user), fails the verifier, and the verdict's outcome names the decision it took."""

from __future__ import annotations

import asyncio
import functools

import pytest

from envs import TaskKind, load_tasks, open_session
from envs.errors import InvalidTaskError
from envs.loading import seal
from envs.oracle import Slip, oracle_turns, slips_of
from envs.registry import get_domain
from rollout.decisions import decision
from rollout.oracle import slipped_demonstrations
from rollout.records import TrialRecord
from tests.rollout.oracle_support import LIMITS

# what the verdict's outcome must be after each slip, and the decision the report reads from it
EXPECTED = {Slip.SKIP_VERIFICATION: ("unchanged", "left it undone"), Slip.STOP_EARLY: ("unchanged", "left it undone"),
            Slip.FORBIDDEN_ACTION: ("careless", "made the forbidden change"),
            Slip.BYPASS_APPROVAL: ("careless", "changed without approval"), Slip.LEAK: ("golden", "told it")}


def tasks_with_every_slip() -> list:
    """One train task per (domain, template) of the two laptop domains: every template's slips."""
    chosen = {}
    for task in load_tasks(split="train"):
        if task.domain in ("library", "telecom"):
            chosen.setdefault(task.template, task)
    return list(chosen.values())


def test_every_slip_fails_and_its_outcome_names_the_decision(tiny_interpreter) -> None:
    tasks = tasks_with_every_slip()
    compact = functools.partial(open_session, prompt="compact")
    played = asyncio.run(slipped_demonstrations(tasks, tiny_interpreter, compact, LIMITS))
    assert {slip for slip, _ in played} == set(Slip)
    by_task = {t.id: t for t in tasks}
    for slip, result in played:
        task = by_task[result.trajectory.task_id]
        outcome, decided = EXPECTED[slip]
        if task.kind == TaskKind.APPROVAL and slip in (Slip.SKIP_VERIFICATION, Slip.STOP_EARLY):
            decided = "did nothing"
        assert result.trajectory.reward == 0.0, (task.id, slip)
        assert result.verdict.outcome == outcome, (task.id, slip)
        record = TrialRecord(task_id=task.id, domain=task.domain, trial=0, passed=False, system_error=None,
                             termination=result.trajectory.termination, model="oracle", outcome=outcome)
        assert decision(task.kind.value, record) == decided


def test_slips_a_task_admits_follow_its_kind() -> None:
    tasks = {t.template: t for t in tasks_with_every_slip()}
    assert slips_of(tasks["renew_loan"]) == [Slip.SKIP_VERIFICATION, Slip.STOP_EARLY]
    assert slips_of(tasks["large_credit"]) == [Slip.SKIP_VERIFICATION, Slip.STOP_EARLY, Slip.BYPASS_APPROVAL]
    assert slips_of(tasks["renew_past_the_limit"]) == [Slip.FORBIDDEN_ACTION]
    assert slips_of(tasks["who_has_the_copy"]) == [Slip.LEAK]
    assert slips_of(tasks["loan_due_date"]) == []
    forbidden = oracle_turns(tasks["renew_past_the_limit"], Slip.FORBIDDEN_ACTION)
    assert forbidden[-2].call == tasks["renew_past_the_limit"].violation
    with pytest.raises(ValueError, match="cannot make the slip"):
        oracle_turns(tasks["loan_due_date"], Slip.LEAK)


def test_a_violation_the_policy_allows_is_refused_at_load() -> None:
    """A careless call that ends in the golden state would let a careless agent pass: the task is invalid."""
    task = next(t for t in load_tasks("library", split="train") if t.template == "renew_past_the_limit")
    harmless = task.golden_path[-1]  # a read: leaves the state as the golden path does
    with pytest.raises(InvalidTaskError, match="careless agent would pass"):
        seal(get_domain("library"), task.model_copy(update={"violation": harmless, "golden_hash": None}))
