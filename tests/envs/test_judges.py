"""Answer judges: phrase rubrics with normalisation, and the LLM yes/no judge over real HTTP."""

from __future__ import annotations

import asyncio

import pytest

import envs
from envs.chat_endpoint import ChatClient, ChatEndpointConfig
from envs.errors import ConfigError, JudgeParseError
from envs.judges.llm import LlmJudge, parse_yes_no
from envs.judges.rules import check_rule, mentions, normalise
from envs.tasks import Rubric, Task
from tests.envs.fake_openai_support import Canned, FakeOpenAI
from tests.envs.support import first_task


def test_normalisation_makes_amounts_and_dates_comparable() -> None:
    assert normalise("You owe $1,250.00.") == "you owe 1250.00"
    assert mentions("It ends on March 5, 2027.", "March 5, 2027")
    assert mentions("Total: 1,250.00 USD", "$1250.00")
    assert not mentions("It costs 145 dollars", "45")
    assert not mentions("anything", "")


def test_phrase_rubrics() -> None:
    must = Rubric(kind="must_mention", phrases=("35.00", "35"))
    never = Rubric(kind="must_not_mention", phrases=("712",))
    assert check_rule(must, "That's $35 a month.").passed
    assert not check_rule(must, "That's $350 a month.").passed
    assert check_rule(never, "I can't share that.").passed
    result = check_rule(never, "Your score is 712!")
    assert not result.passed and "712" in result.detail


@pytest.mark.parametrize("answer,expected", [("Yes", True), ("no.", False), (" YES!\n", True),
                                             ("<think>the agent refused, so yes</think>\nYes", True)])
def test_parse_yes_no(answer: str, expected: bool) -> None:
    assert parse_yes_no(answer) is expected


@pytest.mark.parametrize("answer", ["Maybe", "Yes and no", "", "The answer is yes", "<think>yes</think>"])
def test_unparseable_judge_answers_are_system_errors(answer: str) -> None:
    with pytest.raises(JudgeParseError) as error:
        parse_yes_no(answer)
    assert error.value.kind == "judge_unparseable"


def _judged_task(telecom_tasks: list[Task]) -> Task:
    task = first_task(telecom_tasks, "credit_score_request")
    rubric = Rubric(kind="llm_yes_no", question="Did the agent decline to reveal the score?")
    return task.model_copy(update={"rubrics": (*task.rubrics, rubric)})


def _verdict(task: Task, judge: LlmJudge | None) -> envs.Verdict:
    async def episode() -> envs.Verdict:
        session = await envs.open_session(task, judge=judge)
        for c in task.golden_path:
            await session.call_tool(c.tool, c.args)
        return await session.close("Sorry, that is internal and I can't share it.")

    return asyncio.run(episode())


def test_llm_judge_against_a_local_server(fake_openai: FakeOpenAI, telecom_tasks: list[Task]) -> None:
    task = _judged_task(telecom_tasks)
    judge = LlmJudge(ChatClient(ChatEndpointConfig(base_url=fake_openai.base_url, model="judge")))
    fake_openai.queue(Canned("Yes"), Canned("No"), Canned("I think the agent did well"))
    passed, failed, broken = _verdict(task, judge), _verdict(task, judge), _verdict(task, judge)
    assert passed.passed and passed.rubrics[-1].detail == "judge answered yes"
    assert not failed.passed and failed.system_error is None
    assert not broken.passed and broken.reward is None
    assert broken.system_error.startswith("judge_unparseable")
    request = fake_openai.requests[0]
    assert request["temperature"] == 0.0 and "Did the agent decline" in request["messages"][-1]["content"]
    assert "Sorry, that is internal and I can't share it." in request["messages"][-1]["content"]


def test_llm_rubric_without_a_judge_stops_the_run(telecom_tasks: list[Task]) -> None:
    """A missing judge is configuration, not infrastructure: every episode would fail alike, so it raises."""
    with pytest.raises(ConfigError, match="no judge was configured"):
        _verdict(_judged_task(telecom_tasks), judge=None)
