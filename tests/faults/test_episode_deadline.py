"""The episode's deadline is the agent's: time the user simulator takes and time the engine loses to failed
attempts are off its clock, and a deadline that comes while the infrastructure is still failing voids the
episode (a system error) instead of scoring it 0. Real episodes on a built-in domain; the engine is SGLang's
client against the stand-in server over HTTP, or the policy replayed from text."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from envs import load_tasks, open_session
from rollout.episode import EpisodeConfig, run_episode
from rollout.interpret import Interpreter
from rollout.trajectory import Trajectory
from tbjax.assets.tokenizer import save_tokenizer, train_tokenizer
from tests.faults.replay_support import ReplayEngine
from tests.rollout.sglang_stub_support import StubModel, ThreadServer, on_engine

DEADLINE_S = 0.5
CONFIG = EpisodeConfig(max_turns=4, max_tokens_per_turn=16, token_budget=60_000, timeout_s=DEADLINE_S)
LOOKUP = '<tool_call>\n{"name": "find_member", "arguments": {"card_number": "1"}}\n</tool_call>'


@pytest.fixture(scope="module")
def interpreter(tmp_path_factory) -> Interpreter:
    return Interpreter.from_pretrained(save_tokenizer(train_tokenizer(), tmp_path_factory.mktemp("tok")))


@pytest.fixture(scope="module")
def server():
    running = ThreadServer(StubModel(name="deadline"))
    yield running
    running.stop()


def task():
    return next(t for t in load_tasks("library", split="train") if t.template == "renew_loan")


class SlowParts:
    """The real session, with its user simulator or its tool server made slow."""

    def __init__(self, session: Any, user_s: float = 0.0, tool_s: float = 0.0) -> None:
        self.session, self.user_s, self.tool_s = session, user_s, tool_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    async def user_reply(self, agent_text: str) -> Any:
        await asyncio.sleep(self.user_s)
        return await self.session.user_reply(agent_text)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        await asyncio.sleep(self.tool_s)
        return await self.session.call_tool(name, arguments)


def slow_opener(**delays: float):
    async def open_(task_) -> SlowParts:
        return SlowParts(await open_session(task_), **delays)
    return open_


def answering(ids: list[int]):
    """A stub answer rewriter: the model wrote `ids` (closed by its last id, a stop token)."""
    def rewrite(answer: dict[str, Any]) -> dict[str, Any]:
        answer["output_ids"] = ids
        answer["meta_info"].update(output_token_logprobs=[[-0.5, token, None] for token in ids],
                                   finish_reason={"type": "stop", "matched": ids[-1]})
        return answer
    return rewrite


def on_sglang(server, interpreter, config: EpisodeConfig = CONFIG, **settings) -> Trajectory:
    async def episode(engine):
        return (await run_episode(task(), engine, interpreter, group_id="g", config=config)).trajectory
    return on_engine([server.url], episode, **settings)


def test_an_engine_still_failing_at_the_deadline_is_a_system_error(server, interpreter) -> None:
    server.model.reset(fail_generate=10**6, fail_status=503)
    trajectory = on_sglang(server, interpreter, max_attempts=1000, backoff_s=0.02, max_backoff_s=0.05,
                           cooldown_s=0.0)
    assert trajectory.termination == "system_error" and trajectory.system_error == "engine"
    assert trajectory.reward is None


def test_time_lost_to_retries_is_given_back_to_the_agent(server, interpreter) -> None:
    """Each of 6 turns (a tool call each) fails once and backs off 0.2-0.4 s before it is answered in 0.02 s:
    the failures take longer than the 1 s deadline, the agent's own turns a fraction of it."""
    server.model.reset(fail_every=2, fail_status=503, delay_s=0.02,
                       corrupt=answering(interpreter.encode(LOOKUP) + [interpreter.end_of_turn_id]))
    config = dataclasses.replace(CONFIG, max_turns=6, max_tokens_per_turn=256, timeout_s=1.0)
    trajectory = on_sglang(server, interpreter, config, backoff_s=0.4, max_backoff_s=0.4, cooldown_s=0.0)
    assert trajectory.termination == "max_turns" and trajectory.reward is not None
    assert len(server.model.received) == 2 * config.max_turns


def test_a_slow_agent_still_times_out_and_is_scored(server, interpreter) -> None:
    server.model.reset(delay_s=2 * DEADLINE_S)
    trajectory = on_sglang(server, interpreter)
    assert trajectory.termination == "timeout" and trajectory.reward == 0.0 and trajectory.system_error is None


def test_the_user_simulator_s_time_is_off_the_agent_s_clock(interpreter) -> None:
    """Three replies of 0.3 s each: 0.9 s of waiting on the user against a 0.5 s deadline."""
    engine = ReplayEngine(interpreter, ["Hello, how can I help?", "Could you say that again?",
                                        "One more time, please?", "Sorry, I cannot help."])
    result = asyncio.run(run_episode(task(), engine, interpreter, group_id="g", config=CONFIG,
                                     opener=slow_opener(user_s=0.3)))
    assert result.trajectory.termination != "timeout" and result.trajectory.reward is not None
    assert result.trajectory.timings["user"] > DEADLINE_S


def test_a_tool_call_unanswered_at_the_deadline_is_a_system_error(interpreter) -> None:
    engine = ReplayEngine(interpreter, [LOOKUP, "Sorry, I cannot help."])
    result = asyncio.run(run_episode(task(), engine, interpreter, group_id="g", config=CONFIG,
                                     opener=slow_opener(tool_s=30.0)))
    assert result.trajectory.system_error == "tool_server" and result.trajectory.reward is None
