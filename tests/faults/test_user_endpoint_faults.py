"""A user-simulator endpoint that answers 429 with Retry-After, then 500, then hangs, then answers (a real HTTP
server on 127.0.0.1 speaking /v1/chat/completions): the client waits out the Retry-After, backs off with
jitter, retries the hang as a timeout and returns the answer; a 400 is not retried; a spent retry budget
raises the infrastructure error. Through a real episode (the oracle agent, an LlmUser on that server): scored
when the endpoint recovers, a system error (never reward 0) when it does not."""

from __future__ import annotations

import asyncio
import functools
import itertools
import random
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from pydantic import ValidationError

from envs import load_tasks, open_session
from envs.chat_endpoint import ChatClient, ChatEndpointConfig
from envs.errors import EndpointError, EndpointTimeout
from envs.http_retry import RetryPolicy, retry_after_s, retry_delay
from envs.users import LlmUser
from rollout.episode import EpisodeConfig, EpisodeResult, run_episode
from rollout.failures import INFRASTRUCTURE_ERRORS
from rollout.interpret import Interpreter
from rollout.oracle import OracleEngine
from tbjax.assets.tokenizer import save_tokenizer, train_tokenizer
from tests.envs.fake_openai_support import Canned, FakeOpenAI

TIMEOUT_S = 0.3  # each attempt's deadline; the hang below outlasts it
HANG_S = 1.0
FAULTS = (Canned(status=429, text="slow down", headers={"Retry-After": "1"}), Canned(status=500, text="oops"),
          Canned("too late", delay_s=HANG_S))
ANSWER = "My date of birth is 1980-02-03 and my PIN is 4321."
MESSAGES = [{"role": "user", "content": "What is your PIN?"}]


def _config(fake: FakeOpenAI, **settings: Any) -> ChatEndpointConfig:
    retries = {"timeout_s": TIMEOUT_S, "retry_budget_s": 5.0, "backoff_s": 0.05, "max_backoff_s": 0.2,
               "max_retry_after_s": 2.0, **settings}
    return ChatEndpointConfig(base_url=fake.base_url, model="user-sim", **retries)


def _ask(config: ChatEndpointConfig, rng: random.Random | None = None) -> str:
    async def ask() -> str:
        client = ChatClient(config, rng=rng)
        try:
            return await client.complete(MESSAGES, temperature=0.3)
        finally:
            await client.aclose()

    return asyncio.run(ask())


def _gaps(fake: FakeOpenAI) -> list[float]:
    return [later - earlier for earlier, later in itertools.pairwise(fake.arrivals)]


def test_429_then_500_then_a_hang_are_retried_and_the_answer_returned(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(*FAULTS, Canned(ANSWER))
    assert _ask(_config(fake_openai)) == ANSWER
    assert len(fake_openai.requests) == 4
    after_429, after_500, after_hang = _gaps(fake_openai)
    assert after_429 >= 1.0  # Retry-After: 1 honoured
    assert after_500 < 0.5  # no Retry-After: a backoff within its first window
    assert after_hang >= TIMEOUT_S  # the hang became a timeout, then a retry


def _draws(policy: RetryPolicy, seed: int, retries: int) -> list[float]:
    rng = random.Random(seed)
    return [retry_delay(policy, n, rng, None) for n in range(1, retries + 1)]


def test_backoff_is_exponential_with_full_jitter(fake_openai: FakeOpenAI) -> None:
    settings = {"backoff_s": 0.2, "max_backoff_s": 0.8, "retry_budget_s": 5.0, "max_retry_after_s": 1.0}
    windows = [0.2, 0.4, 0.8]  # backoff_s doubling, capped at max_backoff_s
    draws = {seed: _draws(RetryPolicy(**settings), seed, 3) for seed in (1, 2)}
    assert draws[1] != draws[2]  # two clients do not retry in step
    assert all(0.0 <= d <= w for seed in draws for d, w in zip(draws[seed], windows, strict=True))
    fake_openai.queue(*[Canned(status=503)] * 3, Canned(ANSWER))
    assert _ask(_config(fake_openai, **settings), random.Random(1)) == ANSWER
    gaps = _gaps(fake_openai)
    assert all(gap >= draw for gap, draw in zip(gaps, draws[1], strict=True))  # it slept what it drew
    assert sum(gaps) < sum(windows)  # ... which is shorter than the un-jittered schedule


def test_retry_after_is_read_as_seconds_or_a_date_and_capped() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert retry_after_s("1") == 1.0 and retry_after_s(None) is None and retry_after_s("soon") is None
    assert retry_after_s(format_datetime(now + timedelta(seconds=30), usegmt=True), now) == 30.0
    assert retry_after_s(format_datetime(now - timedelta(seconds=30), usegmt=True), now) == 0.0
    policy = RetryPolicy(backoff_s=0.5, max_retry_after_s=10.0)
    assert 10.0 <= retry_delay(policy, 1, random.Random(0), 3600.0) <= 10.5


def test_a_400_is_not_retried_and_names_status_and_body(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(Canned(status=400, text="model user-sim not found"), Canned(ANSWER))
    with pytest.raises(EndpointError, match="HTTP 400.*model user-sim not found") as rejected:
        _ask(_config(fake_openai))
    assert rejected.value.kind == "endpoint_rejected" and len(fake_openai.requests) == 1


def test_a_spent_retry_budget_raises_the_infrastructure_error(fake_openai: FakeOpenAI) -> None:
    start = time.monotonic()  # nothing queued: the server answers 500 to everything
    with pytest.raises(EndpointError, match="failed on .* attempts") as failing:
        _ask(_config(fake_openai, retry_budget_s=0.5, max_retry_after_s=0.5))
    assert time.monotonic() - start < 1.0 and len(fake_openai.requests) > 2
    assert isinstance(failing.value, INFRASTRUCTURE_ERRORS) and failing.value.kind == "endpoint"
    fake_openai.queue(*[Canned(delay_s=HANG_S)] * 3)
    with pytest.raises(EndpointTimeout, match="timed out") as hanging:
        _ask(_config(fake_openai, timeout_s=0.1, retry_budget_s=0.2, max_retry_after_s=0.2))
    assert hanging.value.kind == "endpoint_timeout"


def test_a_retry_after_past_the_budget_gives_up_at_once(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(Canned(status=429, headers={"Retry-After": "3600"}), Canned(ANSWER))
    start = time.monotonic()
    with pytest.raises(EndpointError, match="HTTP 429"):
        _ask(_config(fake_openai, retry_budget_s=2.0))
    assert time.monotonic() - start < 1.0 and len(fake_openai.requests) == 1


@pytest.mark.parametrize("settings,problem", [
    ({"max_retry_after_s": 300.0, "retry_budget_s": 120.0}, "never be made"),
    ({"backoff_s": 60.0}, "exceeds max_backoff_s"),
    ({"max_retries": 0, "backoff_s": 2.0}, "cannot act"),
    ({"retry_budget": 30.0}, "Extra inputs are not permitted"),
    ({"timeout_s": 0.0}, "greater than 0"),
])
def test_settings_that_cannot_act_are_errors(settings: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        ChatEndpointConfig(base_url="http://127.0.0.1:9/v1", model="m", **settings)


def test_a_saved_config_with_every_default_written_out_loads_back() -> None:
    config = ChatEndpointConfig(base_url="http://127.0.0.1:9/v1", model="m", max_retries=0)
    assert ChatEndpointConfig(**config.model_dump()) == config  # backoff_s etc. at their defaults act no differently


@pytest.fixture(scope="module")
def interpreter(tmp_path_factory: pytest.TempPathFactory) -> Interpreter:
    return Interpreter.from_pretrained(save_tokenizer(train_tokenizer(), tmp_path_factory.mktemp("tok")))


def _oracle_episode_with_llm_user(interpreter: Interpreter, config: ChatEndpointConfig) -> EpisodeResult:
    """The oracle plays telecom/upgrade_plan (it asks the user for date of birth and PIN once) against an
    LlmUser on `config`'s endpoint."""
    task = next(t for t in load_tasks("telecom", split="train") if t.template == "upgrade_plan")

    async def episode() -> EpisodeResult:
        client = ChatClient(config)
        engine = OracleEngine(interpreter)
        engine.expect(task.id, task)
        opener = functools.partial(open_session, user=lambda scenario: LlmUser(scenario, client))
        try:
            return await run_episode(task, engine, interpreter, group_id="faults", opener=opener, session_id=task.id,
                                     config=EpisodeConfig(max_turns=12, max_tokens_per_turn=256, token_budget=8000))
        finally:
            await client.aclose()

    return asyncio.run(episode())


def test_an_episode_is_scored_when_the_user_endpoint_recovers(fake_openai: FakeOpenAI,
                                                              interpreter: Interpreter) -> None:
    fake_openai.queue(*FAULTS, Canned(ANSWER))
    result = _oracle_episode_with_llm_user(interpreter, _config(fake_openai))
    assert len(fake_openai.requests) == 4
    assert result.trajectory.system_error is None and result.trajectory.termination == "agent_done"
    assert result.trajectory.reward == 1.0 and result.verdict is not None and result.verdict.passed


def test_an_episode_is_a_system_error_when_the_user_endpoint_never_recovers(fake_openai: FakeOpenAI,
                                                                            interpreter: Interpreter) -> None:
    fake_openai.queue(*FAULTS)  # then 500 for good
    result = _oracle_episode_with_llm_user(interpreter, _config(fake_openai, retry_budget_s=2.5))
    assert result.trajectory.termination == "system_error" and result.trajectory.system_error == "endpoint"
    assert result.trajectory.reward is None and result.verdict is None
