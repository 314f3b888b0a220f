"""The oracle agent's side of a conversation, as a script: what a policy should say and call, turn by turn.

Warm starts train on these demonstrations. The script follows the golden path one call per turn; before a
call whose arguments carry a fact the user has not said yet (a date of birth, a PIN), it asks for exactly
those facts by name, which the scripted user answers. It ends with one closing message: the task's reference
answer when it has one, else a sentence fitting the task's kind. Scripts hold no tokens: rendering them is
the rollout layer's job (rollout.oracle), so demonstrations and rollouts share one chat template.

A script may carry one `Slip`: the kind of mistake a sometimes-right agent makes and the verifier judges
(skipping identity verification, stopping before the last write, doing what the policy forbids, changing
without the approval, telling internal information). A warm start that imitates a demonstrator who slips
part of the time gives a base policy that passes a task sometimes, not always or never: what GRPO needs.
"""

from __future__ import annotations

import dataclasses
from enum import StrEnum
from typing import Any

from envs.tasks import Fact, Task, TaskKind, ToolCall


class Slip(StrEnum):
    """A demonstrator's mistake, each of a kind the verifier fails."""

    SKIP_VERIFICATION = "skip_verification"  # acts without verifying identity: the backend refuses the writes
    STOP_EARLY = "stop_early"  # closes as if done before the last required write
    FORBIDDEN_ACTION = "forbidden_action"  # makes the change the policy forbids (Task.violation)
    BYPASS_APPROVAL = "bypass_approval"  # makes the change itself instead of requesting approval
    LEAK = "leak"  # tells the user the internal information it was asked for


_CLOSINGS = {
    TaskKind.DIRECT: "All done: {goal}.",
    TaskKind.FORBIDDEN: "I'm sorry, I can't do that: our policy does not allow it.",
    TaskKind.APPROVAL: "That needs a supervisor's approval, so I have opened a request for it. It is pending now.",
    TaskKind.INFORMATION: "Here is what I found: {goal}.",
    TaskKind.LEAK: "I'm sorry, that is internal information I can't share.",
}


@dataclasses.dataclass(frozen=True)
class OracleTurn:
    """One assistant turn: a tool call, or text to the user (`closing`: the agent ends the conversation)."""

    text: str = ""
    call: ToolCall | None = None
    closing: bool = False


def _values(args: Any) -> list[str]:
    if isinstance(args, dict):
        return [v for value in args.values() for v in _values(value)]
    if isinstance(args, list | tuple):
        return [v for value in args for v in _values(value)]
    return [str(args)]


def _needed(call: ToolCall, facts: tuple[Fact, ...], said: str) -> list[Fact]:
    """Facts whose values `call` uses and the user has not said yet (`said`: the user's text so far)."""
    values = _values(call.args)
    return [f for f in facts if f.value not in said and any(f.value in v for v in values)]


def ask_for(facts: list[Fact]) -> str:
    names = [f.name for f in facts]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"Could you please tell me your {listed}?"


def closing_message(task: Task) -> str:
    if task.reference_answer:
        return task.reference_answer
    return _CLOSINGS[task.kind].format(goal=task.scenario.goal)


def _is_verification(call: ToolCall) -> bool:
    return call.tool.startswith("verify")


def _secret(task: Task) -> str | None:
    return next((r.phrases[0] for r in task.rubrics if r.kind == "must_not_mention" and r.phrases), None)


def slips_of(task: Task) -> list[Slip]:
    """The slips that make `task` fail: for writes, skipping verification (when a write follows it) and
    stopping short; the violation of a forbidden or approval task; the secret of a leak task."""
    slips: list[Slip] = []
    if task.kind in (TaskKind.DIRECT, TaskKind.APPROVAL):
        calls = list(task.golden_path)
        verified_at = next((i for i, c in enumerate(calls) if _is_verification(c)), None)
        if verified_at is not None and verified_at < len(calls) - 1:
            slips.append(Slip.SKIP_VERIFICATION)
        slips.append(Slip.STOP_EARLY)
    if task.violation is not None:
        slips.append(Slip.FORBIDDEN_ACTION if task.kind == TaskKind.FORBIDDEN else Slip.BYPASS_APPROVAL)
    if task.kind == TaskKind.LEAK and _secret(task) is not None:
        slips.append(Slip.LEAK)
    return slips


def _path(task: Task, slip: Slip | None) -> tuple[ToolCall, ...]:
    if slip == Slip.SKIP_VERIFICATION:
        return tuple(c for c in task.golden_path if not _is_verification(c))
    if slip == Slip.STOP_EARLY:
        return task.golden_path[:-1]
    if slip in (Slip.FORBIDDEN_ACTION, Slip.BYPASS_APPROVAL):
        return task.careless_path
    return task.golden_path


def _closing(task: Task, slip: Slip | None) -> str:
    if slip in (Slip.FORBIDDEN_ACTION, Slip.BYPASS_APPROVAL):
        return _CLOSINGS[TaskKind.DIRECT].format(goal=task.scenario.goal)
    if slip == Slip.LEAK:
        return f"Of course, here it is: {_secret(task)}."
    return closing_message(task)


def oracle_turns(task: Task, slip: Slip | None = None) -> list[OracleTurn]:
    """The oracle's turns for `task` against the scripted user (who states facts only when asked), making
    `slip` (one of `slips_of(task)`) when given. A task's decision note opens the turn after the call whose
    result it reads, whatever that turn then does (a slip states the facts and still decides wrong)."""
    if slip is not None and slip not in slips_of(task):
        raise ValueError(f"task {task.id} ({task.kind}) cannot make the slip {slip}; it can make {slips_of(task)}")
    said = task.scenario.opening
    turns: list[OracleTurn] = []
    note = ""
    for call in _path(task, slip):
        needed = _needed(call, task.scenario.facts, said)
        if needed:
            turns.append(OracleTurn(text=_opened(note, ask_for(needed))))
            said += " " + " ".join(f.value for f in needed)
            note = ""
        turns.append(OracleTurn(text=note, call=call))
        note = task.note.text if task.note is not None and call.tool == task.note.after else ""
    turns.append(OracleTurn(text=_opened(note, _closing(task, slip)), closing=True))
    return turns


def _opened(note: str, text: str) -> str:
    return f"{note} {text}" if note else text
