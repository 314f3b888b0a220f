"""Scripted agents for τ²-bench tasks, for checking that our session and verdict grade as τ² does: the gold
trajectory (the task's gold actions) and four ways to spoil it, each of which τ² scores as it scores an agent
that behaved so.

The agent makes the gold actions that are its own; for a run of actions that are the user's (telecom's
device), it asks the user in words, naming the calls between `USER_ACTIONS` tags, which the directed user
(envs.tau2.directed_user) performs. It ends by telling the user what the task says must be communicated;
the directed user then stops.
"""

from __future__ import annotations

import itertools
import json
from enum import StrEnum
from typing import Any

from envs.oracle import OracleTurn
from envs.tasks import ToolCall
from envs.tau2.tasks import Action, Tau2Case

USER_ACTIONS = ("<user_actions>", "</user_actions>")
DONE_TEXT = "Your request has been handled."


class Variant(StrEnum):
    GOLD = "gold"
    UNTOLD = "untold"  # gold actions, but the information the user must be told is left out
    NOTHING = "nothing"  # no action; the agent says it is done
    SHORT = "short"  # the gold actions less the last one
    WRONG_ARGUMENT = "wrong_argument"  # the last gold action with one argument changed


def user_request(actions: list[Action]) -> str:
    calls = [{"name": a.name, "arguments": a.arguments} for a in actions]
    return f"Please do this on your side: {USER_ACTIONS[0]}{json.dumps(calls)}{USER_ACTIONS[1]}"


def requested_actions(text: str) -> list[dict[str, Any]] | None:
    """The calls an agent's message asks the user to make (None: it asks for none)."""
    start, end = text.find(USER_ACTIONS[0]), text.find(USER_ACTIONS[1])
    if start < 0 or end < start:
        return None
    return json.loads(text[start + len(USER_ACTIONS[0]):end])


def spoiled(value: Any) -> Any:
    """A different value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + "_x"
    if isinstance(value, list):
        return [*value, value[0]] if value else ["x"]
    return {"spoiled": True}


def with_wrong_argument(action: Action) -> Action:
    if not action.arguments:
        return action.model_copy(update={"name": action.name + "_x"})
    key = sorted(action.arguments)[0]
    return action.model_copy(update={"arguments": {**action.arguments, key: spoiled(action.arguments[key])}})


def actions_of(case: Tau2Case, variant: Variant) -> list[Action]:
    actions = list(case.actions)
    if variant == Variant.NOTHING:
        return []
    if variant == Variant.SHORT:
        return actions[:-1]
    if variant == Variant.WRONG_ARGUMENT and actions:
        return [*actions[:-1], with_wrong_argument(actions[-1])]
    return actions


def agent_turns(case: Tau2Case, variant: Variant = Variant.GOLD) -> list[OracleTurn]:
    """The scripted agent's turns: its own calls, requests for the user's, then its closing message (sent to
    the user, who stops)."""
    turns: list[OracleTurn] = []
    for requestor, run in itertools.groupby(actions_of(case, variant), key=lambda a: a.requestor):
        if requestor == "assistant":
            turns += [OracleTurn(call=ToolCall(tool=a.name, args=a.arguments)) for a in run]
        else:
            turns.append(OracleTurn(text=user_request(list(run))))
    told = variant in (Variant.GOLD, Variant.SHORT, Variant.WRONG_ARGUMENT) and case.communicate_info
    turns.append(OracleTurn(text=" ".join(case.communicate_info) if told else DONE_TEXT))
    return turns
