"""The oracle agent's side of a conversation, as a script: what a policy should say and call, turn by turn.

Warm starts train on these demonstrations. The script follows the golden path one call per turn; before a
call whose arguments carry a fact the user has not said yet (a date of birth, a PIN), it asks for exactly
those facts by name, which the scripted user answers. It ends with one closing message: the task's reference
answer when it has one, else a sentence fitting the task's kind. Scripts hold no tokens: rendering them is
the rollout layer's job (rollout.oracle), so demonstrations and rollouts share one chat template.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from envs.tasks import Fact, Task, TaskKind, ToolCall

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


def oracle_turns(task: Task) -> list[OracleTurn]:
    """The oracle's turns for `task` against the scripted user (who states facts only when asked)."""
    said = task.scenario.opening
    turns: list[OracleTurn] = []
    for call in task.golden_path:
        needed = _needed(call, task.scenario.facts, said)
        if needed:
            turns.append(OracleTurn(text=ask_for(needed)))
            said += " " + " ".join(f.value for f in needed)
        turns.append(OracleTurn(call=call))
    turns.append(OracleTurn(text=closing_message(task), closing=True))
    return turns
