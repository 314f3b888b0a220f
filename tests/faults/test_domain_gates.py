"""The domains' gates against a direct caller, through real sessions (the SDK's MCP client and server, the
task's sandbox): verification cannot be guessed by trying, free text is bounded, and a boolean is not a number.
Each reproduces what an attacker's pass found on 107cad1: 2,000 wrong PINs and then the right one verified, a
64 MB ticket summary was stored, and `amount_usd=true` issued a $1.00 credit."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from mcp.types import CallToolResult

import envs
from envs.arguments import MAX_TEXT_CHARS
from envs.service_desk import MAX_VERIFICATION_FAILURES
from envs.session import BuiltinSession, open_session


def text_of(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


@pytest.fixture
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as runner:
        yield runner


def golden_call(tool: str) -> tuple[envs.Task, int]:
    """A telecom task whose golden path calls `tool`, and where in the path it does."""
    for task in envs.load_tasks("telecom"):
        for index, call in enumerate(task.golden_path):
            if call.tool == tool:
                return task, index
    raise AssertionError(f"no telecom golden path calls {tool}")


def session_before(runner: asyncio.Runner, tool: str) -> tuple[BuiltinSession, dict[str, Any]]:
    """A session that played a golden path up to its call of `tool`, and that call's arguments."""
    task, index = golden_call(tool)
    session = runner.run(open_session(task))
    for call in task.golden_path[:index]:
        result = runner.run(session.call_tool(call.tool, call.args))
        assert not result.is_error, text_of(result)
    return session, dict(task.golden_path[index].args)


def test_verification_locks_after_repeated_failures(runner) -> None:
    session, right = session_before(runner, "verify_identity")
    wrong = {**right, "pin": "0000" if right["pin"] != "0000" else "1111"}
    try:
        for _ in range(MAX_VERIFICATION_FAILURES):
            result = runner.run(session.call_tool("verify_identity", wrong))
            assert result.is_error and "identity check failed" in text_of(result)
        result = runner.run(session.call_tool("verify_identity", right))  # the right facts, too late
        assert result.is_error and "verification is locked" in text_of(result), text_of(result)
    finally:
        runner.run(session.close())
    fresh, right = session_before(runner, "verify_identity")  # a new conversation starts unlocked
    try:
        assert not runner.run(fresh.call_tool("verify_identity", right)).is_error
    finally:
        runner.run(fresh.close())


def test_free_text_past_the_cap_is_refused_and_not_stored(runner) -> None:
    session, args = session_before(runner, "open_ticket")
    text_argument = next(name for name, value in args.items() if isinstance(value, str) and " " in value)
    tickets = len(session.sandbox.query("SELECT * FROM tickets"))
    try:
        result = runner.run(session.call_tool("open_ticket", {**args, text_argument: "x" * (MAX_TEXT_CHARS + 1)}))
        assert result.is_error and f"more than the {MAX_TEXT_CHARS:,}" in text_of(result), text_of(result)
        assert len(session.sandbox.query("SELECT * FROM tickets")) == tickets  # nothing was stored
        result = runner.run(session.call_tool("open_ticket", {**args, text_argument: "x" * MAX_TEXT_CHARS}))
        assert not result.is_error, text_of(result)
    finally:
        runner.run(session.close())


def test_a_boolean_is_not_an_amount(runner) -> None:
    session, args = session_before(runner, "issue_credit")
    credits = len(session.sandbox.query("SELECT * FROM credits"))
    try:
        result = runner.run(session.call_tool("issue_credit", {**args, "amount_usd": True}))
        assert result.is_error and "amount_usd True: is a boolean" in text_of(result), text_of(result)
        assert len(session.sandbox.query("SELECT * FROM credits")) == credits  # no $1.00 credit
        assert not runner.run(session.call_tool("issue_credit", args)).is_error  # the number itself still works
    finally:
        runner.run(session.close())
