"""Separating a turn's reasoning from what it says and does.

Qwen models reason inside <think>...</think> at the start of a turn. Four shapes occur: both tags
(complete), an opening tag the turn never closed (truncated: the token cap or the model stopped inside its
reasoning), a closing tag only (the chat template's generation prompt already opened the block, as Qwen's
thinking-only templates do), and no tags (no reasoning). When the prompt opened the block and the turn has
no closing tag, the whole turn is unfinished reasoning. A closing tag the prompt did not open that follows a
tool call is stray (reasoning comes before actions): it is dropped, and the turn read as having no reasoning,
so the call before it still runs.
"""

from __future__ import annotations

from typing import Literal

from rollout.interpret.formats import CALL_OPEN

ReasoningState = Literal["complete", "truncated", "close_only", "absent"]
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def split_reasoning(text: str, *, opened_by_prompt: bool = False) -> tuple[str | None, str, ReasoningState]:
    """(reasoning or None, the text after it, state). The reasoning is stripped; the rest is not."""
    head = text.lstrip()
    if head.startswith(THINK_OPEN):
        reasoning, closed, rest = head[len(THINK_OPEN):].partition(THINK_CLOSE)
        return (reasoning.strip(), rest, "complete") if closed else (reasoning.strip(), "", "truncated")
    reasoning, closed, rest = text.partition(THINK_CLOSE)
    if closed and not opened_by_prompt and CALL_OPEN in reasoning:
        return None, reasoning + rest, "absent"
    if closed:
        return reasoning.strip(), rest, "close_only"
    if opened_by_prompt:
        return text.strip(), "", "truncated"
    return None, text, "absent"
