"""Rewards that mean what they say, in every built-in domain, through real episode sessions (in-process MCP).

* A failed tool call leaves no trace: after a write refused for a bad argument, the golden path still reaches
  the golden state (same minted ids, no stale memory).
* A bad argument comes back as an isError result naming the tool, the argument and the rule it broke, and
  `Domain.invoke` (golden replays) refuses it with the same text; a bug in a tool body stays a crash.
* An information task is not passed by dumping every tool result back to the user; its reference answer is.
* A date is graded alike at every desk: month and day without the year pass when the date is in the domain
  clock's year, and fail when it is in another (a contract ending next May is not "May 20").
"""

from __future__ import annotations

import asyncio
import re
from datetime import date
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

import envs
from envs.sandbox import Sandbox
from envs.session import open_session
from envs.tasks import Task, TaskKind

DOMAINS = ["clinic", "library", "telecom", "ticketing", "utility"]

# domain -> (template whose golden path mints an id with `tool`, tool, bad arguments, the argument named)
FAILED_WRITES: dict[str, tuple[str, str, dict[str, Any], str]] = {
    "clinic": ("controlled_refill_needs_review", "open_request", {"note": "refill\ud800"}, "note"),
    "library": ("waive_large_overdue_fine", "open_staff_request", {"amount_usd": 1e300}, "amount_usd"),
    "telecom": ("roaming_needs_approval", "open_ticket", {"amount_usd": "Infinity"}, "amount_usd"),
    "ticketing": ("list_within_cap", "list_ticket_for_resale", {"price_usd": 1e300}, "price_usd"),
    "utility": ("record_customer_reading", "submit_meter_reading", {"register": 2**63}, "register"),
}

# domain -> (tool, arguments with one bad value, the argument named, words of the rule it broke)
BAD_ARGUMENTS: dict[str, tuple[str, dict[str, Any], str, str]] = {
    "clinic": ("list_open_slots", {"practitioner_id": "PR-101", "from_date": "2026-13-45"}, "from_date",
               "not a date"),
    "library": ("list_rooms", {"branch_id": "HAR", "booking_date": "2026-05-0\ud800"}, "booking_date", "surrogate"),
    "telecom": ("find_customer", {"email": "a\udfff@example.com"}, "email", "surrogate"),
    "ticketing": ("list_ticket_for_resale", {"ticket_id": "TK-1", "price_usd": "Infinity"}, "price_usd", "finite"),
    "utility": ("submit_meter_reading", {"meter_id": "MT-1", "register": 2**63}, "register", "64-bit"),
}


def _task(domain: str, template: str) -> Task:
    return next(t for t in envs.load_tasks(domain) if t.template == template)


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


@pytest.mark.parametrize("domain", DOMAINS)
def test_a_write_refused_for_a_bad_argument_leaves_no_trace(domain: str) -> None:
    template, tool, bad, argument = FAILED_WRITES[domain]
    task = _task(domain, template)

    async def episode() -> envs.Verdict:
        session = await open_session(task)
        for call in task.golden_path:
            if call.tool == tool:
                refused = await session.call_tool(tool, {**call.args, **bad})
                assert refused.is_error and argument in _text(refused), _text(refused)
            result = await session.call_tool(call.tool, call.args)
            assert not result.is_error, _text(result)
        return await session.close(task.reference_answer)

    verdict = asyncio.run(episode())
    assert verdict.passed, verdict.report()


def test_a_failed_transaction_restores_counters_and_memory_and_keeps_written_tables_hashed() -> None:
    sandbox = envs.get_domain("telecom").new_sandbox()
    initial = sandbox.state_hash()
    insert = "INSERT INTO plan_changes VALUES (?, ?, ?, ?, ?)"

    def write(fail: bool) -> None:
        with sandbox.transaction():
            sandbox.memory.setdefault("verified", set()).add("C-10001")
            sandbox.execute(insert, (sandbox.new_id("PC"), "L-20001", "BASIC5", "MAX50", sandbox.today))
            if fail:
                raise ToolError("refused after the write")

    with pytest.raises(ToolError):
        write(fail=True)
    assert sandbox.memory == {} and sandbox.state_hash() == initial
    write(fail=False)  # the same statement again: SQLite's statement cache does not re-run the authorizer
    assert sandbox.rows("plan_changes").keys() >= {("PC-N0001",)}
    assert sandbox.state_hash() != initial
    sandbox.close()


@pytest.mark.parametrize("domain", DOMAINS)
def test_a_bad_argument_is_refused_naming_tool_argument_and_rule(domain: str) -> None:
    tool, arguments, argument, rule = BAD_ARGUMENTS[domain]
    task = envs.load_tasks(domain)[0]

    async def call() -> str:
        session = await open_session(task)
        try:
            result = await session.call_tool(tool, arguments)
        finally:
            await session.close()
        assert result.is_error
        return _text(result)

    text = asyncio.run(call())
    assert tool in text and argument in text and rule in text, text
    assert "validation error" not in text and "errors.pydantic.dev" not in text, text
    sandbox = envs.get_domain(domain).new_sandbox()
    with pytest.raises(ToolError) as refused:
        envs.get_domain(domain).invoke(sandbox, tool, arguments)
    sandbox.close()
    assert str(refused.value) == text


def test_a_bug_in_a_tool_body_stays_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyError in a body is a programming error: no detail reaches the agent, and invoke raises it as is."""
    domain = envs.get_domain("telecom")

    def list_plans(db: Sandbox) -> list[dict[str, Any]]:
        return [{}["missing"]]

    monkeypatch.setitem(domain._functions, "list_plans", list_plans)
    task = envs.load_tasks("telecom")[0]

    async def call() -> Any:
        session = await open_session(task)
        try:
            return await session.call_tool("list_plans", {})
        finally:
            await session.close()

    result = asyncio.run(call())
    assert result.is_error and _text(result) == "Error executing tool list_plans"
    sandbox = domain.new_sandbox()
    with pytest.raises(KeyError):
        domain.invoke(sandbox, "list_plans", {})
    sandbox.close()


async def _information_verdicts(task: Task) -> tuple[envs.Verdict, envs.Verdict]:
    """(the dump's verdict, the reference answer's verdict), each after the golden path played through MCP."""
    verdicts = []
    for dump in (True, False):
        session = await open_session(task)
        texts = [_text(await session.call_tool(call.tool, call.args)) for call in task.golden_path]
        verdicts.append(await session.close("\n".join(texts) if dump else task.reference_answer))
    return verdicts[0], verdicts[1]


@pytest.mark.parametrize("domain", DOMAINS)
def test_an_information_task_is_not_passed_by_dumping_the_tool_results(domain: str) -> None:
    tasks = [t for t in envs.load_tasks(domain) if t.kind == TaskKind.INFORMATION]
    assert tasks
    for task in tasks:
        dumped, answered = asyncio.run(_information_verdicts(task))
        assert not dumped.passed, dumped.report()
        assert answered.passed, answered.report()


_ISO = re.compile(r"\d{4}-\d{2}-\d{2}")


def _asked_date(task: Task) -> date | None:
    """The date a must_mention rubric of `task` asks for (its ISO phrase), if any."""
    isos = [p for r in task.rubrics if r.kind == "must_mention" for p in r.phrases if _ISO.fullmatch(p)]
    return date.fromisoformat(isos[0]) if isos else None


@pytest.mark.parametrize("domain", ["clinic", "library", "telecom", "utility"])
def test_a_date_without_its_year_passes_only_in_the_clocks_year(domain: str) -> None:
    """The reference answer with the year cut from its date, after the golden path through MCP."""
    this_year = date.fromisoformat(envs.get_domain(domain).today).year
    outcomes: dict[bool, list[bool]] = {True: [], False: []}
    for task in envs.load_tasks(domain):
        asked = _asked_date(task)
        spoken = asked and f"{asked:%B} {asked.day}, {asked.year}"
        if not spoken or spoken not in task.reference_answer:
            continue
        short = task.reference_answer.replace(spoken, f"{asked:%B} {asked.day}")

        async def episode(answer: str, task: Task = task) -> bool:
            session = await open_session(task)
            for call in task.golden_path:
                await session.call_tool(call.tool, call.args)
            return (await session.close(answer)).passed

        assert asyncio.run(episode(task.reference_answer)), task.id
        outcomes[asked.year == this_year].append(asyncio.run(episode(short)))
    assert outcomes[True] and all(outcomes[True]), outcomes
    assert not any(outcomes[False]), outcomes
    if domain == "telecom":  # contract ends lie in later years too: both rules are exercised
        assert outcomes[False]
