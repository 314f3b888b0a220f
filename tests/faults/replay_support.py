"""A policy replaced by the texts it writes, for fault tests that need an exact agent."""

from __future__ import annotations

from collections.abc import Sequence

from rollout.engines.protocol import Generation, SamplingParams
from rollout.interpret import Interpreter
from rollout.interpret.render import END_OF_TEXT


class ReplayEngine:
    """The policy, replaced by the texts it writes: each turn's text encoded, closed by end-of-turn (the
    last by end-of-text). Everything after the engine (interpreter, session, tools, grading) is real."""

    def __init__(self, interpreter: Interpreter, turns: Sequence[str]) -> None:
        self.interpreter = interpreter
        end_of_text = interpreter.tokenizer.convert_tokens_to_ids(END_OF_TEXT)
        ends = [interpreter.end_of_turn_id] * (len(turns) - 1) + [end_of_text]
        self.turns = [interpreter.encode(text) + [end] for text, end in zip(turns, ends, strict=True)]

    async def generate(self, input_ids: Sequence[int], sampling: SamplingParams, *,
                       session_id: str | None = None) -> Generation:
        ids = self.turns.pop(0)
        return Generation(tuple(ids), (0.0,) * len(ids), "stop", "replay", len(input_ids))

    async def end_session(self, session_id: str) -> None:
        pass
