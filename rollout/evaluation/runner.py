"""Running k trials per task concurrently into a trial log, and the token-level trial of our own policies.

A trial runner is any `async (task, trial) -> TrialRecord`: the token-level one below drives
`rollout.episode.run_episode` on an `Engine` (embedded JAX, SGLang servers); `rollout.evaluation.chat`
drives an OpenAI-compatible API model. `run_trials` only schedules: it skips the (task, trial) pairs the log
already holds, so a resumed campaign never redoes a finished trial, and appends each record the moment its
trial ends, so an interruption loses only the trials in flight; a progress bar (rollout.evaluation.progress)
counts them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from rich.console import Console

from envs import Task, Verdict
from rollout.engines.protocol import Engine, Generation, SamplingParams
from rollout.episode import EpisodeConfig, SessionOpener, derive_seed, run_episode
from rollout.evaluation.progress import TrialProgress
from rollout.interpret import Interpreter
from rollout.records import TrialLog, TrialRecord, Usage

log = logging.getLogger(__name__)
TrialRunner = Callable[[Task, int], Awaitable[TrialRecord]]


async def run_trials(tasks: Sequence[Task], k: int, runner: TrialRunner, trial_log: TrialLog, *,
                     concurrency: int = 32, label: str = "trials", console: Console | None = None) -> int:
    """Runs trials 0..k-1 of every task not yet in `trial_log`, at most `concurrency` at once, under a
    progress bar labelled `label` (on `console`, default stdout); returns how many ran. The first exception
    cancels the trials in flight and propagates (their records are not written)."""
    if k < 1 or concurrency < 1:
        raise ValueError(f"need k >= 1 and concurrency >= 1, got k={k} concurrency={concurrency}")
    todo = [(task, trial) for task in tasks for trial in range(k) if (task.id, trial) not in trial_log.done]
    if trial_log.resumed:
        log.info("resuming: %d trials already recorded in %s, %d to run", trial_log.resumed, trial_log.path, len(todo))
    log.info("%s: %d trials of %d tasks, %d at once; the first ones also wait for the engine to warm up (an "
             "in-process engine compiles on its first requests)", label, len(todo), len(tasks), concurrency)
    gate = asyncio.Semaphore(concurrency)

    with TrialProgress(len(todo), label, console) as progress:
        async def one(task: Task, trial: int) -> None:
            async with gate:
                record = await runner(task, trial)
            trial_log.append(record)
            progress.finished(record)

        async with asyncio.TaskGroup() as group:
            for task, trial in todo:
                group.create_task(one(task, trial))
    return len(todo)


@dataclasses.dataclass
class _Meter:
    prompt: int = 0
    cached: int = 0
    completion: int = 0
    reasoning: int = 0


class MeteredEngine:
    """An Engine that adds up each session's tokens: every call's prompt (what an API would bill), the
    cached part of it, the completion, and the completion's reasoning (up to and including the token that
    closes the <think> block, or all of it when the block never closes)."""

    def __init__(self, engine: Engine, think_open_id: int | None = None, think_close_id: int | None = None,
                 opened_by_prompt: bool = False) -> None:
        self.engine = engine
        self.think_open_id, self.think_close_id = think_open_id, think_close_id
        self.opened_by_prompt = opened_by_prompt
        self.sessions: dict[str, _Meter] = {}

    async def generate(self, input_ids: Sequence[int], sampling: SamplingParams, *,
                       session_id: str | None = None) -> Generation:
        generation = await self.engine.generate(input_ids, sampling, session_id=session_id)
        meter = self.sessions.setdefault(session_id or "", _Meter())
        meter.prompt += generation.prompt_tokens
        meter.cached += generation.cached_tokens
        meter.completion += len(generation.output_ids)
        meter.reasoning += self._reasoning(generation.output_ids)
        return generation

    async def end_session(self, session_id: str) -> None:
        await self.engine.end_session(session_id)

    def _reasoning(self, ids: Sequence[int]) -> int:
        if self.think_close_id is not None and self.think_close_id in ids:
            return list(ids).index(self.think_close_id) + 1
        opened_here = bool(ids) and self.think_open_id is not None and ids[0] == self.think_open_id
        return len(ids) if self.opened_by_prompt or opened_here else 0

    def usage(self, session_id: str) -> Usage:
        meter = self.sessions.pop(session_id, _Meter())
        return Usage(prompt_tokens=meter.prompt, completion_tokens=meter.completion,
                     reasoning_tokens=meter.reasoning, cached_tokens=meter.cached)

    async def update_weights(self, hf_dir: str, version: str) -> None:
        await self.engine.update_weights(hf_dir, version)

    async def health(self) -> bool:
        return await self.engine.health()

    async def close(self) -> None:
        await self.engine.close()


def token_trial_runner(engine: Engine, interpreter: Interpreter, *, model: str,
                       config: EpisodeConfig | None = None, opener: SessionOpener | None = None,
                       seed: int | None = None) -> TrialRunner:
    """Trials of a policy served token-in/token-out by `engine` (any Engine: an in-process JaxEngine from
    the trainer, SGLangEngine over servers), recorded under the name `model`. With a `seed`, trial i of a
    task samples with a seed derived from (seed, task, i), so two policies evaluated with the same seed face
    the same random draws (a paired comparison), and a rerun repeats itself on engines honouring seeds."""
    metered = MeteredEngine(engine, _single_token(interpreter, "<think>"), _single_token(interpreter, "</think>"),
                            interpreter.opens_reasoning)
    extra = {} if opener is None else {"opener": opener}

    async def trial(task: Task, index: int) -> TrialRecord:
        session_id = f"{task.id}#{index}"
        start = time.perf_counter()
        result = await run_episode(task, metered, interpreter, group_id=task.id, config=config or EpisodeConfig(),
                                   session_id=session_id, seed=None if seed is None else derive_seed(
                                       seed, task.id, index), **extra)
        t, verdict = result.trajectory, result.verdict
        return TrialRecord(
            task_id=task.id, domain=task.domain, trial=index,
            passed=None if t.system_error else bool(verdict and verdict.passed),
            system_error=t.system_error, termination=t.termination, turns=t.turns,
            usage=metered.usage(session_id), model=model, weight_version=t.weight_version,
            seconds=round(time.perf_counter() - start, 3),
            diff=verdict_lines(verdict), outcome=verdict.outcome if verdict else None,
            reward_breakdown=verdict.breakdown if verdict else None,
            malformed_tool_calls=t.malformed_tool_calls)

    return trial


def verdict_lines(verdict: Verdict | None) -> list[str]:
    """The verdict's differences from the golden state and its failed rubrics, one line each."""
    if verdict is None:
        return []
    failed = [f"rubric {r.kind} failed: {r.description} {r.detail}".strip() for r in verdict.rubrics if not r.passed]
    return [entry.describe() for entry in verdict.diff] + failed


def _single_token(interpreter: Interpreter, token: str) -> int | None:
    ids = interpreter.encode(token)
    return ids[0] if len(ids) == 1 else None
