"""One assistant turn, interpreted: reasoning, what the user sees, the calls to run and the malformed ones.

`parse_assistant` is pure text in, AssistantTurn out, and never raises on model output: whatever the policy
writes becomes calls, malformed calls (answered as tool errors) or visible text.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable

from rollout.interpret.calls import MalformedCall, MalformedKind, ToolCall
from rollout.interpret.formats import ToolCallFormat, split_tool_calls
from rollout.interpret.reasoning import ReasoningState, split_reasoning
from rollout.interpret.tools import ToolCatalog


@dataclasses.dataclass(frozen=True)
class AssistantTurn:
    """`calls` keeps the order the model wrote them in, so results go back in the same order.
    `truncated`: the turn ended without an end-of-turn token (cut by the token cap)."""

    text: str  # the decoded output, special tokens included
    reasoning: str | None
    reasoning_state: ReasoningState
    visible: str  # outside reasoning and tool calls, special tokens removed, stripped
    calls: tuple[ToolCall | MalformedCall, ...]
    truncated: bool

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [call for call in self.calls if isinstance(call, ToolCall)]

    @property
    def malformed(self) -> list[MalformedCall]:
        return [call for call in self.calls if isinstance(call, MalformedCall)]

    @property
    def malformed_by_kind(self) -> Counter[MalformedKind]:
        return Counter(call.kind for call in self.malformed)


def parse_assistant(text: str, tools: ToolCatalog, fmt: ToolCallFormat, *, truncated: bool = False,
                    opened_by_prompt: bool = False, special_tokens: Iterable[str] = ()) -> AssistantTurn:
    """Interpret decoded model output. Tool calls are read only after the reasoning (a call drafted while
    thinking is not a call); `special_tokens` (e.g. <|im_end|>) are removed from reasoning and visible text."""
    reasoning, rest, state = split_reasoning(text, opened_by_prompt=opened_by_prompt)
    outside, blocks = split_tool_calls(rest, fmt)
    calls = tuple(block if isinstance(block, MalformedCall) else tools.resolve(block) for block in blocks)
    specials = [token for token in special_tokens if token]
    return AssistantTurn(
        text=text,
        reasoning=None if reasoning is None else _without(reasoning, specials).strip(),
        reasoning_state=state,
        visible=_without(outside, specials).strip(),
        calls=calls,
        truncated=truncated,
    )


def _without(text: str, tokens: list[str]) -> str:
    for token in tokens:
        text = text.replace(token, "")
    return text
