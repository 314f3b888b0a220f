"""The ThinkingBox session against real MCP stdio processes of a synthetic domain server (no clone needed):
reserved-tool protocol, oracle and do-nothing agents, the <DONE> end marker, the user turn cap, the LLM user
and judge over real HTTP, and server failures as typed system errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from envs.chat_endpoint import ChatClient, ChatEndpointConfig
from envs.judges.llm import LlmJudge
from envs.thinkingbox import ServerError, ThinkingBoxSuite, load_cases
from envs.thinkingbox.agents import attempt
from envs.thinkingbox.config import ThinkingBoxConfig
from envs.thinkingbox.grading import UNJUDGED
from envs.thinkingbox.user import ThinkingBoxUser
from envs.users.base import STOP_MARKER, UserTurn
from tests.envs.fake_openai_support import Canned, FakeOpenAI
from tests.envs.thinkingbox_fixtures.support import synthetic_clone, synthetic_config

ADD_ONE = "thinkingbox/notes_group1:test_add_one"
NOTHING = "thinkingbox/notes_group1:test_nothing_to_do"
RUBRIC = "thinkingbox/notes_group1:test_add_two_with_rubric"


@pytest.fixture
def config(tmp_path: Path) -> ThinkingBoxConfig:
    return synthetic_config(synthetic_clone(tmp_path))


class RecordingUser:
    def __init__(self) -> None:
        self.heard: list[str] = []

    def opening(self) -> str:
        return "hello"

    async def reply(self, agent_text: str) -> UserTurn:
        self.heard.append(agent_text)
        return UserTurn("go on", done=False)


def _endpoint(fake: FakeOpenAI) -> ChatClient:
    return ChatClient(ChatEndpointConfig(base_url=fake.base_url, model="sim", timeout_s=5, max_retries=0))


def test_oracle_reaches_the_golden_state_and_doing_nothing_only_where_nothing_is_due(config) -> None:
    suite = ThinkingBoxSuite(config, load_cases(config))

    async def run() -> dict[tuple[str, str], object]:
        return {(t, a): await attempt(suite, t, a) for t in (ADD_ONE, NOTHING) for a in ("oracle", "nothing")}

    results = asyncio.run(run())
    assert results[(ADD_ONE, "oracle")].state_matches and results[(ADD_ONE, "oracle")].verdict.passed
    assert not results[(ADD_ONE, "nothing")].state_matches
    assert results[(ADD_ONE, "nothing")].verdict.diff[0].column == "(row count)"
    assert results[(NOTHING, "nothing")].state_matches and results[(NOTHING, "oracle")].state_matches
    assert all(r.system_error is None and r.seconds["total"] > 0 for r in results.values())


def test_session_messages_tools_done_marker_and_turn_cap(config) -> None:
    users: list[RecordingUser] = []
    suite = ThinkingBoxSuite(config, load_cases(config), user=lambda case: users.append(RecordingUser()) or users[-1])

    async def run() -> list[object]:
        session = await suite.open(suite.case(NOTHING).task)
        seen = [session.system_messages, [s["function"]["name"] for s in session.tool_schemas], session.opening()]
        refused = await session.call_tool("__reserved__geteffects", {})
        first = await session.user_reply("Which note do you mean?")
        second = await session.user_reply("Anything else?")
        capped = await session.user_reply("Still there?")  # max_user_sim_turns: 2 in this test case
        ended_by_cap = session.ended_by
        verdict = await session.close(final_reply="There are no notes to change. <DONE>")
        session2 = await suite.open(suite.case(ADD_ONE).task)
        added = await session2.call_tool("add_note", {"text": "call Bob"})
        done = await session2.user_reply("I added the note. <DONE>")
        verdict2 = await session2.close()
        return [*seen, refused, first, second, capped, ended_by_cap, verdict, added, done, session2.ended_by,
                verdict2]

    (messages, tools, opening, refused, first, second, capped, ended_by_cap, verdict, added, done, ended_by,
     verdict2) = asyncio.run(run())
    assert [m["role"] for m in messages] == ["system", "system"]
    assert "<DONE>" in messages[0]["content"] and "notes desk" in messages[1]["content"]
    assert tools == ["add_note", "list_notes", "crash", "hang"] and opening == "What notes are there?"
    assert refused.is_error and "unknown tool" in refused.content[0].text
    assert (first.done, second.done, capped.done, ended_by_cap) == (False, False, True, "user_turn_cap")
    assert users[0].heard == ["Which note do you mean?", "Anything else?"]  # the capped turn never asked it
    assert verdict.passed and verdict.system_error is None
    assert not added.is_error and '"call Bob"' in added.content[0].text
    assert done.done and ended_by == "agent_done_marker" and users[1].heard == []
    assert verdict2.passed


def test_llm_user_over_http_sees_the_context_and_stops(config, fake_openai: FakeOpenAI) -> None:
    case = load_cases(config)[0]
    fake_openai.queue(Canned("It should say call Bob."), Canned(f"Thanks! {STOP_MARKER}"))
    user = ThinkingBoxUser(case.query, case.user_context, _endpoint(fake_openai))

    async def run() -> list[UserTurn]:
        return [await user.reply("What should the note say?"), await user.reply("Done: the note is added.")]

    first, second = asyncio.run(run())
    assert (first.text, first.done) == ("It should say call Bob.", False)
    assert (second.text, second.done) == ("Thanks!", True)
    system = fake_openai.requests[0]["messages"][0]["content"]
    assert 'You are Ann. You want a note "call Bob".' in system and case.query in system
    assert "answer yes" not in system.lower()  # the context alone decides how to react to offers


@pytest.mark.parametrize("answers,passed,error", [(["Yes"], True, None), (["No"], False, None),
                                                 (None, False, UNJUDGED)])
def test_rubrics_are_judged_on_the_last_reply_or_reported_unjudged(config, fake_openai: FakeOpenAI, answers,
                                                                   passed, error) -> None:
    judge = None
    if answers is not None:
        fake_openai.queue(*(Canned(a) for a in answers))
        judge = LlmJudge(_endpoint(fake_openai))
    suite = ThinkingBoxSuite(config, load_cases(config), judge=judge)

    async def run():
        session = await suite.open(suite.case(RUBRIC).task)
        for text in ("a", "b"):
            await session.call_tool("add_note", {"text": text})
        return await session.close(final_reply="I added notes a and b. <DONE>")

    verdict = asyncio.run(run())
    assert (verdict.passed, verdict.system_error, verdict.state_matches) == (passed, error, True)
    if answers is not None:
        judged = fake_openai.requests[0]["messages"][1]["content"]
        assert "I added notes a and b." in judged and "<DONE>" not in judged
        assert "Does the reply say both notes were added?" in judged


def test_wrong_state_fails_without_asking_the_judge(config, fake_openai: FakeOpenAI) -> None:
    suite = ThinkingBoxSuite(config, load_cases(config), judge=LlmJudge(_endpoint(fake_openai)))

    async def run():
        session = await suite.open(suite.case(RUBRIC).task)
        return await session.close(final_reply="Nothing done.")

    verdict = asyncio.run(run())
    assert not verdict.passed and verdict.system_error is None and not verdict.state_matches
    assert fake_openai.requests == []


@pytest.mark.parametrize("tool,kind", [("crash", "tb_server_crash"), ("hang", "tb_server_timeout")])
def test_a_dead_or_hung_server_is_a_typed_system_error(tmp_path: Path, tool: str, kind: str) -> None:
    config = synthetic_config(synthetic_clone(tmp_path), call_timeout_s=2.0)
    suite = ThinkingBoxSuite(config, load_cases(config))

    async def run() -> ServerError:
        session = await suite.open(suite.case(ADD_ONE).task)
        with pytest.raises(ServerError) as caught:
            await session.call_tool(tool, {})
        with pytest.raises(ServerError):
            await session.close()
        return caught.value

    error = asyncio.run(run())
    assert error.kind == kind and "notes_desk" in str(error)


def test_init_failure_and_missing_interpreter_are_system_errors(tmp_path: Path) -> None:
    config = synthetic_config(synthetic_clone(tmp_path))
    case = load_cases(config)[0]
    broken = case.__class__(**{**case.__dict__, "config": {**case.config, "fail_init": True}})
    suite = ThinkingBoxSuite(config, [broken])
    with pytest.raises(ServerError) as caught:
        asyncio.run(suite.open(broken.task))
    assert caught.value.kind == "tb_server_reserved" and "asked to fail" in str(caught.value)

    nowhere = ThinkingBoxSuite(config.model_copy(update={"python": str(tmp_path / "no-python")}), [case])
    with pytest.raises(ServerError) as caught:
        asyncio.run(nowhere.open(case.task))
    assert caught.value.kind == "tb_server_start"
