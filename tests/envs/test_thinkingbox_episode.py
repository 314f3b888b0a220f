"""ThinkingBox tasks through the unchanged episode loop: `run_episode(..., opener=suite.open)` with a tiny
JAX policy on the embedded engine and a local OpenAI-compatible server playing the user simulator. Once on
the synthetic clone (always), once on a real ThinkingBox-Bench task (when the clone is configured)."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from envs.chat_endpoint import ChatEndpointConfig
from envs.thinkingbox import ThinkingBoxSuite
from envs.thinkingbox.session import ThinkingBoxSession
from envs.users.base import STOP_MARKER
from rollout.episode import EpisodeConfig, EpisodeResult, run_episode
from rollout.interpret import Interpreter, ToolCatalog
from tbjax.assets.tiny import make_flax_checkpoint
from tbjax.engine.jax_engine import JaxEngine
from tbjax.models import from_pretrained
from tests.envs.fake_openai_support import Canned, FakeOpenAI
from tests.envs.thinkingbox_fixtures.support import real_config, synthetic_clone, synthetic_config


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory):
    directory = make_flax_checkpoint(tmp_path_factory.mktemp("tiny-policy"))
    return from_pretrained(directory), Interpreter.from_pretrained(directory)


def _user_endpoint(fake: FakeOpenAI) -> ChatEndpointConfig:
    return ChatEndpointConfig(base_url=fake.base_url, model="user-sim", timeout_s=10, max_retries=0)


async def _prompt_length(suite: ThinkingBoxSuite, task, interpreter: Interpreter) -> int:
    session = await suite.open(task)
    try:
        opening = {"role": "user", "content": session.opening()}
        return len(interpreter.first_prompt([*session.system_messages, opening], ToolCatalog(session.tool_schemas)))
    finally:
        await session.abort()


def _run(suite: ThinkingBoxSuite, task, policy) -> tuple[EpisodeResult, list[ThinkingBoxSession]]:
    """One episode of `task`; the opened sessions are recorded so the test can see how the episode ended."""
    model, interpreter = policy
    opened: list[ThinkingBoxSession] = []

    async def opener(t):
        opened.append(await suite.open(t))
        return opened[-1]

    async def scenario() -> EpisodeResult:
        prompt = await _prompt_length(suite, task, interpreter)
        engine = JaxEngine(model, slots=1, max_len=512 * math.ceil((prompt + 200) / 512))
        config = EpisodeConfig(max_turns=3, max_tokens_per_turn=16, token_budget=prompt + 120, timeout_s=900)
        try:
            return await run_episode(task, engine, interpreter, group_id="tb", config=config, opener=opener)
        finally:
            await engine.close()
            await suite.aclose()

    return asyncio.run(scenario()), opened


def _check(result: EpisodeResult, opened: list[ThinkingBoxSession], fake: FakeOpenAI, user_context: str) -> None:
    trajectory = result.trajectory
    assert trajectory.system_error is None and result.verdict is not None
    assert trajectory.task_id.startswith("thinkingbox/") and result.verdict.task_id == trajectory.task_id
    # The random tiny policy changes nothing, and every task here needs a change: a scored failure.
    assert trajectory.reward == 0.0 and result.verdict.state_matches is False and result.verdict.diff
    assert trajectory.turns >= 1 and sum(trajectory.loss_mask) == trajectory.completion_tokens > 0
    assert len(opened) == 1 and not opened[0].server.alive  # the server process was stopped at close
    if trajectory.termination == "user_done":
        assert opened[0].ended_by == "user_stop"
    if opened[0].user_turns:
        system = fake.requests[0]["messages"][0]["content"]
        assert user_context.strip().splitlines()[0] in system
        assert fake.requests[0]["model"] == "user-sim"


def test_synthetic_task_runs_through_run_episode(tmp_path: Path, policy, fake_openai: FakeOpenAI) -> None:
    config = synthetic_config(synthetic_clone(tmp_path), user=_user_endpoint(fake_openai))
    suite = ThinkingBoxSuite.load(config, preflight=False)  # the fake server runs on this Python, not 3.12
    fake_openai.queue(Canned("It should say call Bob."), Canned(f"Thanks. {STOP_MARKER}"))
    task = suite.tasks[0]
    result, opened = _run(suite, task, policy)
    _check(result, opened, fake_openai, suite.case(task.id).user_context)
    assert opened[0].user_turns >= 1  # the tiny policy answers in text, so the simulator was asked


def test_real_benchmark_task_runs_through_run_episode(policy, fake_openai: FakeOpenAI) -> None:
    config = real_config()
    config = config.model_copy(update={"user": _user_endpoint(fake_openai)})
    suite = ThinkingBoxSuite.load(config, limit=1)
    fake_openai.queue(*(Canned("My order is ORD-70020.") for _ in range(3)))
    task = suite.tasks[0]
    result, opened = _run(suite, task, policy)
    _check(result, opened, fake_openai, suite.case(task.id).user_context)
