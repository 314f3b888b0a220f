"""The episode loop: agent turn -> tool calls through the domain's MCP client -> tool results -> ... ->
reply to the user -> user turn, until the user stops, the agent ends, max turns, the token budget or the
agent's deadline. It returns the Trajectory (exactly the sampled tokens, their behaviour log-probs, the
loss mask) and the Verdict.

The deadline (`timeout_s`) is on the agent's clock: it stops while the user simulator answers and gives back
what the engine lost to failed attempts (`rollout.engines.protocol.Retries`). Where it comes while the engine
is still retrying or a tool call is still unanswered, the infrastructure is what failed: a system error, not
a `timeout`.

Infrastructure failures of the engine, the user simulator, the judge or the tool server
(`rollout.failures.INFRASTRUCTURE_ERRORS`) are system errors carried on the trajectory (reward None, never 0);
any other exception is a bug and propagates, after the session is closed. The agent's bad output is never an
error: a malformed call goes back to the agent as a tool error. The agent ends an episode by emitting
end-of-text instead of end-of-turn.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from envs import EnvironmentSession, Task, Verdict, open_session
from rollout.engines.protocol import RETRIES, Engine, Retries, SamplingParams
from rollout.failures import INFRASTRUCTURE_ERRORS, closes_on_error, system_error_kind
from rollout.interpret import (
    Interpreter,
    MalformedKind,
    TokenSequence,
    ToolCall,
    ToolCatalog,
    malformed_message,
    tool_message,
)
from rollout.trajectory import Termination, Trajectory

log = logging.getLogger(__name__)

SessionOpener = Callable[[Task], Awaitable[EnvironmentSession]]


@dataclasses.dataclass(frozen=True)
class EpisodeConfig:
    """What every episode runs under: its limits (turns, tokens, deadline) and how each turn is sampled. The
    defaults are small and safe (32k-token episodes); the 27B reference configs set the seed run's."""

    max_turns: int = 40  # agent turns
    max_tokens_per_turn: int = 4096
    token_budget: int = 32_000  # the whole episode, prompt included
    timeout_s: float = 1800.0
    temperature: float = 1.0
    top_k: int = 20
    top_p: float = 0.95
    min_p: float = 0.0


@dataclasses.dataclass
class EpisodeResult:
    trajectory: Trajectory
    verdict: Verdict | None  # None when a system error voided the episode


class _SystemError(Exception):
    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind, self.detail = kind, detail


class _Timer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.waiting_on: tuple[str, str] | None = None  # (phase, failure kind) of the call awaited now

    async def measure(self, phase: str, awaitable: Awaitable[Any], failure_kind: str) -> Any:
        """Awaits `awaitable`, adding its time to `phase`; infrastructure exceptions become system errors of
        their own kind or else `failure_kind`, any other exception propagates as it is."""
        start = time.perf_counter()
        self.waiting_on = phase, failure_kind  # left set when the deadline cancels the call: it was waiting on it
        try:
            result = await awaitable
        except INFRASTRUCTURE_ERRORS as error:
            self.waiting_on = None
            raise _SystemError(system_error_kind(error, failure_kind), repr(error)) from error
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start
        self.waiting_on = None
        return result


class _AgentClock:
    """The episode's deadline, counting the agent's time only (module docstring)."""

    def __init__(self, deadline: asyncio.Timeout) -> None:
        self.deadline = deadline
        self.engine_retries = Retries()  # of the engine call in flight

    async def generate(self, awaitable: Awaitable[Any]) -> Any:
        self.engine_retries = Retries()
        token = RETRIES.set(self.engine_retries)
        try:
            return await awaitable
        finally:
            RETRIES.reset(token)
            self._extend(self.engine_retries.seconds)

    async def stopped(self, awaitable: Awaitable[Any]) -> Any:
        """Awaits `awaitable` with the clock stopped."""
        loop = asyncio.get_running_loop()
        when = self.deadline.when()
        left = None if when is None else when - loop.time()
        self.deadline.reschedule(None)
        try:
            return await awaitable
        finally:
            if not self.deadline.expired():
                self.deadline.reschedule(None if left is None else loop.time() + left)

    def _extend(self, seconds: float) -> None:
        when = self.deadline.when()
        if seconds and when is not None and not self.deadline.expired():  # an expired one is unwinding
            self.deadline.reschedule(when + seconds)


class Episode:
    """One episode's state; `run` drives it. Kept as an object so the loop reads as the protocol it is."""

    def __init__(self, task: Task, group_id: str, engine: Engine, interpreter: Interpreter,
                 config: EpisodeConfig, session_id: str, seed: int | None = None):
        self.task, self.group_id, self.engine, self.interp, self.config = task, group_id, engine, interpreter, config
        self.session_id = session_id
        self.seed = seed  # None: the engine's own randomness; else each turn's sampling seed derives from it
        self.sequence = TokenSequence()
        self.versions: list[str] = []
        self.turns = self.prompt_tokens = self.reprefilled_tokens = self.truncated_turns = 0
        self._last_context = 0  # tokens in the sequence after the last turn was sampled
        self.malformed: Counter[MalformedKind] = Counter()
        self.last_reply: str | None = None
        self.timer = _Timer()

    def _sampling(self, max_new_tokens: int) -> SamplingParams:
        c = self.config
        seed = None if self.seed is None else (self.seed * 1_000_003 + self.turns) & 0x7FFFFFFF
        return SamplingParams(max_new_tokens=max_new_tokens, temperature=c.temperature, top_k=c.top_k, top_p=c.top_p,
                              min_p=c.min_p, stop_token_ids=tuple(self.interp.stop_token_ids), seed=seed)

    async def _conversation(self, session: EnvironmentSession) -> Termination:
        tools = ToolCatalog(session.tool_schemas)
        opening = {"role": "user", "content": session.opening()}
        rendered = tools if session.tools_in_prompt else None
        self.sequence.add_context(self.interp.first_prompt([*session.system_messages, opening], rendered))
        self.prompt_tokens = len(self.sequence.token_ids)
        while True:
            remaining = self.config.token_budget - len(self.sequence.token_ids)
            if remaining <= 0:
                self.sequence.cut_context_after(self.config.token_budget)  # a trajectory never exceeds its budget
                return "token_budget"
            if self.turns >= self.config.max_turns:
                return "max_turns"
            cap = min(self.config.max_tokens_per_turn, remaining)
            generation = await self.timer.measure("engine", self.clock.generate(self.engine.generate(
                self.sequence.token_ids, self._sampling(cap), session_id=self.session_id)), "engine")
            if self.versions and generation.weight_version != self.versions[-1]:  # a publish since the last turn:
                cacheable = self._last_context  # what the last call's prompt and completion left in the cache
                self.reprefilled_tokens += max(0, cacheable - generation.cached_tokens)
            self.sequence.add_sampled(generation.output_ids, generation.logprobs)
            self._last_context = len(self.sequence.token_ids)
            self.versions.append(generation.weight_version)
            self.turns += 1
            turn = self.interp.interpret(generation.output_ids, tools)
            self.malformed.update(turn.malformed_by_kind)
            self.truncated_turns += turn.truncated
            if turn.truncated and cap == remaining:
                return "token_budget"
            if generation.output_ids and generation.output_ids[-1] != self.interp.end_of_turn_id \
                    and not turn.truncated:
                self.last_reply = turn.visible
                return "agent_done"  # end-of-text: the agent closed the conversation
            if turn.calls and not turn.truncated:
                replies = [await self._tool_reply(session, call) for call in turn.calls]
            else:
                self.last_reply = turn.visible
                user = await self.timer.measure("user", self.clock.stopped(session.user_reply(turn.visible)),
                                                "user_simulator")
                if user.done:
                    return "user_done"
                replies = [{"role": "user", "content": user.text}]
            self.sequence.add_context(self.interp.continuation(generation.output_ids, replies))

    async def _tool_reply(self, session: EnvironmentSession, call: Any) -> dict[str, str]:
        if isinstance(call, ToolCall):
            result = await self.timer.measure("tools", session.call_tool(call.name, call.arguments), "tool_server")
            return tool_message(result)
        return malformed_message(call)

    def _infrastructure_at_deadline(self) -> _SystemError | None:
        """What the deadline interrupted, when it was the infrastructure's to answer: an engine call with
        failed attempts, or a tool call."""
        phase, kind = self.timer.waiting_on or ("", "")
        if phase == "engine" and self.clock.engine_retries.failed_attempts:
            attempts = self.clock.engine_retries.failed_attempts
            return _SystemError(kind, f"the engine was still retrying ({attempts} failed attempts) at the "
                                      f"episode's {self.config.timeout_s:.0f} s deadline")
        if phase == "tools":
            return _SystemError(kind, f"a tool call was still unanswered at the episode's "
                                      f"{self.config.timeout_s:.0f} s deadline")
        return None

    def _trajectory(self, termination: Termination, reward: float | None, error: str | None) -> Trajectory:
        sampled = sum(self.sequence.loss_mask)
        return Trajectory(
            task_id=self.task.id, group_id=self.group_id, token_ids=list(self.sequence.token_ids),
            loss_mask=list(self.sequence.loss_mask), logprobs=list(self.sequence.logprobs),
            weight_versions=self.versions, reward=reward, termination=termination, system_error=error,
            prompt_tokens=self.prompt_tokens, completion_tokens=sampled, turns=self.turns,
            reprefilled_tokens=self.reprefilled_tokens, truncated_turns=self.truncated_turns,
            malformed=dict(self.malformed), timings=dict(self.timer.seconds))

    async def run(self, opener: SessionOpener) -> EpisodeResult:
        """Opens the session, converses, grades. Infrastructure failures give a system-error result; any
        other exception propagates, the session closed first (no sandbox or tool server outlives a bug)."""
        start = time.perf_counter()
        try:
            session = await self.timer.measure("open", opener(self.task), "environment")
        except _SystemError as error:
            log.warning("%s: system error (%s) opening the session, not scored: %s", self.session_id, error.kind,
                        error.detail)
            return EpisodeResult(self._trajectory("system_error", None, error.kind), None)
        failure: _SystemError | None = None
        termination: Termination = "system_error"
        async with closes_on_error(session):
            try:
                async with asyncio.timeout(self.config.timeout_s) as deadline:
                    self.clock = _AgentClock(deadline)
                    termination = await self._conversation(session)
            except TimeoutError:
                failure = self._infrastructure_at_deadline()
                termination = "timeout"  # the agent's own time ran out
            except _SystemError as error:
                failure = error
            finally:
                await self.engine.end_session(self.session_id)
        try:
            closing = session.close(final_reply=self.last_reply, termination=termination)
            verdict = await self.timer.measure("grade", closing, "grader")
        except _SystemError as error:
            failure, verdict = failure or error, None
        self.timer.seconds["total"] = time.perf_counter() - start
        if failure is not None or verdict is None or verdict.system_error:
            kind = failure.kind if failure else (verdict.system_error if verdict else "grader")
            if failure is not None:  # counted apart from the agent's failures; the log says what broke
                log.warning("%s: system error (%s), not scored: %s", self.session_id, kind, failure.detail)
            return EpisodeResult(self._trajectory("system_error", None, kind), None)
        return EpisodeResult(self._trajectory(termination, verdict.reward, None), verdict)


def derive_seed(*parts: object) -> int:
    """A 31-bit sampling seed that depends only on `parts` (stable across processes and Python versions)."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


async def run_episode(task: Task, engine: Engine, interpreter: Interpreter, *, group_id: str,
                      config: EpisodeConfig = EpisodeConfig(), opener: SessionOpener = open_session,
                      session_id: str | None = None, seed: int | None = None) -> EpisodeResult:
    """Runs one episode of `task`; `opener` opens its environment session (built-in domains by default).
    A `seed` makes the episode's sampling reproducible on engines that honour per-request seeds."""
    episode = Episode(task, group_id, engine, interpreter, config, session_id or f"{group_id}/{id(task)}", seed)
    return await episode.run(opener)
