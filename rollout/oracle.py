"""Demonstrations: the oracle agent's episodes, recorded through the same episode loop as rollouts.

`OracleEngine` is an `Engine` that, instead of sampling, returns the token ids of the oracle's next turn
(envs.oracle) for the task behind each session id. Running it through `run_episode` yields trajectories whose
tokens, loss mask and rendering are exactly what the policy sees and produces at rollout time; only episodes
the verifier passes are kept. The closing message ends with end-of-text: the oracle closes the conversation.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence

from envs import Task
from envs.oracle import OracleTurn, Slip, oracle_turns, slips_of
from rollout.engines.protocol import EngineError, Generation, SamplingParams
from rollout.episode import EpisodeConfig, EpisodeResult, SessionOpener, run_episode
from rollout.interpret import ChatRenderer, Interpreter, ToolCall
from rollout.interpret.render import ANCHOR, END_OF_TEXT, END_OF_TURN

ORACLE_VERSION = "oracle"


class OracleEngine:
    """Plays each session's oracle script, one turn per `generate` call; `expect` registers a session."""

    def __init__(self, renderer: ChatRenderer) -> None:
        self.renderer = renderer
        end_of_text = renderer.tokenizer.convert_tokens_to_ids(END_OF_TEXT)
        if not isinstance(end_of_text, int) or end_of_text not in renderer.stop_token_ids:
            raise ValueError(f"the tokenizer has no {END_OF_TEXT} stop token for the oracle's closing turn")
        self.end_of_text_id = end_of_text
        self._prefix = renderer.render(ANCHOR[:1], add_generation_prompt=True)
        self._scripts: dict[str, deque[list[int]]] = {}

    def turn_ids(self, turn: OracleTurn) -> list[int]:
        """The template's rendering of the assistant turn, closed by <|im_end|> or, for the closing turn,
        by end-of-text."""
        message: dict = {"role": "assistant", "content": turn.text}
        if turn.call is not None:
            message["tool_calls"] = [ToolCall(turn.call.tool, dict(turn.call.args)).as_openai()]
        text = self.renderer.render([ANCHOR[0], message])
        if not text.startswith(self._prefix):
            raise ValueError("the chat template renders the assistant turn's header differently after a reply")
        body = text[len(self._prefix):text.rindex(END_OF_TURN)]
        close = self.end_of_text_id if turn.closing else self.renderer.end_of_turn_id
        return self.renderer.encode(body) + [close]

    def expect(self, session_id: str, task: Task, slip: Slip | None = None) -> None:
        """The session plays the oracle's turns for a built-in `task` (made with `slip`, if any)."""
        self.play(session_id, oracle_turns(task, slip))

    def play(self, session_id: str, turns: Sequence[OracleTurn]) -> None:
        """The session plays `turns`, one a `generate` call (a suite's scripted agent, e.g. envs.tau2.gold)."""
        self._scripts[session_id] = deque(self.turn_ids(turn) for turn in turns)

    async def generate(self, input_ids: Sequence[int], sampling: SamplingParams, *,
                       session_id: str | None = None) -> Generation:
        script = self._scripts.get(session_id or "")
        if not script:
            raise EngineError(f"the oracle has no turn left for session {session_id!r}")
        ids = script.popleft()[:sampling.max_new_tokens]
        finish = "stop" if ids[-1] in sampling.stop_token_ids else "length"
        return Generation(tuple(ids), (0.0,) * len(ids), finish, ORACLE_VERSION, len(input_ids))

    async def end_session(self, session_id: str) -> None:
        self._scripts.pop(session_id, None)

    async def update_weights(self, hf_dir: str, version: str) -> None:
        raise EngineError("the oracle engine has no weights")

    async def health(self) -> bool:
        return True

    async def close(self) -> None:
        self._scripts.clear()


async def _play(plays: Sequence[tuple[Task, Slip | None]], interpreter: Interpreter, opener: SessionOpener,
                config: EpisodeConfig, concurrency: int) -> list[EpisodeResult]:
    """The oracle's episode of each (task, slip), in order."""
    engine = OracleEngine(interpreter)
    gate = asyncio.Semaphore(concurrency)

    async def one(task: Task, slip: Slip | None) -> EpisodeResult:
        session_id = task.id if slip is None else f"{task.id}/{slip}"
        async with gate:
            engine.expect(session_id, task, slip)
            return await run_episode(task, engine, interpreter, group_id="oracle", config=config, opener=opener,
                                     session_id=session_id)

    return list(await asyncio.gather(*(one(task, slip) for task, slip in plays)))


async def demonstrations(tasks: Sequence[Task], interpreter: Interpreter, opener: SessionOpener,
                         config: EpisodeConfig, *, concurrency: int = 16) -> tuple[list[EpisodeResult], list[str]]:
    """The oracle's passing episodes of `tasks`, in task order, and the ids of tasks it failed (a script
    the scripted user cannot follow, or an episode cut by the config's turn or token limits)."""
    results = await _play([(task, None) for task in tasks], interpreter, opener, config, concurrency)
    passed = [r for r in results if r.trajectory.reward == 1.0]
    failed = [r.trajectory.task_id for r in results if r.trajectory.reward != 1.0]
    return passed, failed


async def slipped_demonstrations(tasks: Sequence[Task], interpreter: Interpreter, opener: SessionOpener,
                                 config: EpisodeConfig, *,
                                 concurrency: int = 16) -> list[tuple[Slip, EpisodeResult]]:
    """The oracle's episode of every slip every task can make (`envs.oracle.slips_of`), kept whatever the
    verifier said of it: imperfect behaviour is what the warm start is meant to imitate part of the time."""
    plays = [(task, slip) for task in tasks for slip in slips_of(task)]
    results = await _play(plays, interpreter, opener, config, concurrency)
    return [(slip, result) for (_, slip), result in zip(plays, results, strict=True)]
