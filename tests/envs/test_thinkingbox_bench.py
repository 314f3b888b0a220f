"""The real ThinkingBox-Bench v1 release through the adapter (skips unless TBJAX_THINKINGBOX_DATA and
TBJAX_THINKINGBOX_PYTHON are set): the release's task counts, the oracle on one task per domain, and the
do-nothing agent, which must pass only the one task whose golden state is its initial state. The full runs
(507/507 and 1/507) are `python -m envs.thinkingbox.validate`."""

from __future__ import annotations

import asyncio
import statistics
from collections import Counter

import pytest

from envs.chat_endpoint import ChatClient, ChatEndpointConfig
from envs.judges.llm import LlmJudge
from envs.thinkingbox import DOMAINS, TASK_PREFIX, ThinkingBoxSuite, is_benchmark_task
from envs.thinkingbox.agents import Attempt, attempt
from envs.verdict import Verdict
from tests.envs.fake_openai_support import Canned, FakeOpenAI
from tests.envs.thinkingbox_fixtures.support import real_config

RELEASE_COUNTS = {"retail": 98, "travel_hospitality": 104, "auto_insurance": 100, "neobank_support": 104,
                  "consulting": 101}
# The one task whose golden state equals its initial state (found by the full do-nothing run).
DO_NOTHING_PASSES = "thinkingbox/sandbox_neobank_support_v1_group1:test_he_017"


@pytest.fixture(scope="module")
def suite() -> ThinkingBoxSuite:
    return ThinkingBoxSuite.load(real_config())


def test_release_counts(suite: ThinkingBoxSuite) -> None:
    cases = list(suite.cases.values())
    domains = Counter(case.domain.removeprefix(TASK_PREFIX) for case in cases)
    assert len(cases) == 507 and dict(domains) == RELEASE_COUNTS
    assert set(domains) == set(DOMAINS.values())
    assert sum(bool(case.rubrics) for case in cases) == 30
    assert all(is_benchmark_task(task.id) and task.domain.startswith(TASK_PREFIX) for task in suite.tasks)
    for domain in RELEASE_COUNTS:  # golden paths average 4.4-8.8 calls per domain
        mean = statistics.mean(len(c.golden) for c in cases if c.domain == TASK_PREFIX + domain)
        assert 4.0 < mean < 9.0
    assert all(len(c.scenario.tools) >= 27 and "<DONE>" in c.agent_instructions for c in cases)
    assert all("sources" not in c.config for c in cases)  # no Typesense here


def _sample(suite: ThinkingBoxSuite) -> list[str]:
    first: dict[str, str] = {}
    for task in suite.tasks:
        first.setdefault(task.domain, task.id)
    return [*first.values(), next(c.id for c in suite.cases.values() if c.rubrics)]


def test_oracle_and_do_nothing_on_a_sample(suite: ThinkingBoxSuite) -> None:
    sample = _sample(suite)

    async def run() -> list[Attempt]:
        return [await attempt(suite, task_id, agent) for task_id in sample for agent in ("oracle", "nothing")]

    attempts = asyncio.run(run())
    oracle = [a for a in attempts if a.agent == "oracle"]
    nothing = [a for a in attempts if a.agent == "nothing"]
    assert all(a.system_error is None or a.system_error == "rubrics_unjudged" for a in oracle)
    assert all(a.state_matches and a.tool_errors == 0 for a in oracle), [a.task_id for a in oracle]
    assert not any(a.state_matches for a in nothing)
    assert all(a.verdict is not None and a.verdict.diff for a in nothing)
    assert all(a.seconds["total"] < 30 for a in attempts)


def test_do_nothing_passes_the_task_whose_golden_state_is_initial(suite: ThinkingBoxSuite) -> None:
    result = asyncio.run(attempt(suite, DO_NOTHING_PASSES, "nothing"))
    assert result.state_matches and result.verdict is not None and result.verdict.passed


def test_a_rubric_task_is_judged_on_the_last_reply(suite: ThinkingBoxSuite, fake_openai: FakeOpenAI) -> None:
    case = next(c for c in suite.cases.values() if c.rubrics)
    fake_openai.queue(*(Canned("Yes") for _ in case.rubrics))
    endpoint = ChatEndpointConfig(base_url=fake_openai.base_url, model="judge", timeout_s=10, max_retries=0)
    judged = ThinkingBoxSuite(suite.config, [case], judge=LlmJudge(ChatClient(endpoint)))

    async def run() -> Verdict:
        session = await judged.open(case.task)
        for call in case.golden:
            await session.call_tool(call.tool, dict(call.args))
        return await session.close(final_reply="Your request is complete. <DONE>")

    verdict = asyncio.run(run())
    assert verdict.passed and verdict.state_matches and len(verdict.rubrics) == len(case.rubrics) >= 1
    asked = [request["messages"][1]["content"] for request in fake_openai.requests]
    assert [text.endswith(f"Question: {q}") for text, q in zip(asked, case.rubrics, strict=True)] == \
        [True] * len(case.rubrics)
    assert all("Your request is complete." in text and "<DONE>" not in text for text in asked)
