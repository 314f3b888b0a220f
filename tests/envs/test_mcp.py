"""Tools through the real MCP SDK: errors the agent can read, injection-proof SQL, isolated episodes."""

from __future__ import annotations

import asyncio
import json

import pytest

import envs
from envs.domain import Domain
from envs.tasks import Task
from tests.envs.support import first_task


def test_tool_schemas_come_from_type_hints_and_field_descriptions(telecom: Domain) -> None:
    schema = telecom.mcp_tools["issue_credit"].parameters
    assert schema["required"] == ["invoice_id", "amount_usd", "reason"]
    assert schema["properties"]["amount_usd"]["type"] == "number"
    assert schema["properties"]["amount_usd"]["exclusiveMinimum"] == 0
    assert "US dollars" in schema["properties"]["amount_usd"]["description"]
    assert "db" not in schema["properties"]
    suspend = telecom.mcp_tools["suspend_line"].parameters["properties"]["reason"]
    assert suspend["enum"] == ["lost_device", "stolen_device", "customer_request"]


async def _call_all(task: Task, calls: list[tuple[str, dict]]) -> tuple[list, str]:
    session = await envs.open_session(task)
    results = [await session.call_tool(name, args) for name, args in calls]
    digest = session.sandbox.state_hash()
    await session.close()
    return results, digest


@pytest.mark.parametrize("name,args,message", [
    ("issue_credit", {"invoice_id": "INV-40001", "amount_usd": "lots", "reason": "x"}, "valid number"),
    ("issue_credit", {"invoice_id": "INV-40001", "amount_usd": -5, "reason": "x"}, "greater than 0"),
    ("suspend_line", {"line_id": "L-20001", "reason": "bored"}, "lost_device"),
    ("change_plan", {"line_id": "L-20001"}, "plan_code"),
    ("no_such_tool", {}, "Unknown tool"),
])
def test_schema_invalid_arguments_are_error_results(telecom_tasks: list[Task], name: str, args: dict,
                                                    message: str) -> None:
    task = first_task(telecom_tasks, "small_credit")
    results, digest = asyncio.run(_call_all(task, [*[(c.tool, c.args) for c in task.golden_path[:2]],
                                                   (name, args)]))
    assert results[-1].is_error
    assert message in results[-1].content[0].text
    assert digest == envs.get_domain("telecom").new_sandbox(task.initial_patch).state_hash()


def test_refusals_are_error_results_and_leave_no_partial_writes(telecom_tasks: list[Task]) -> None:
    task = first_task(telecom_tasks, "upgrade_plan")
    line = task.golden_path[-1].args["line_id"]
    unverified = [("change_plan", {"line_id": line, "plan_code": "UNLTD"})]
    results, digest = asyncio.run(_call_all(task, unverified))
    assert results[0].is_error and "not verified" in results[0].content[0].text
    assert digest == envs.get_domain("telecom").database.state_hash


INJECTIONS = ["x' OR '1'='1", "L-20001'; DROP TABLE lines; --", "\"; DELETE FROM customers; --",
              "HOTSPOT') ; UPDATE lines SET status='suspended'; --", "%' OR 1=1 --"]


@pytest.mark.parametrize("payload", INJECTIONS)
def test_sql_injection_in_string_arguments_changes_nothing(telecom_tasks: list[Task], payload: str) -> None:
    task = first_task(telecom_tasks, "add_addon")
    identify = [(c.tool, c.args) for c in task.golden_path[:2]]
    line = task.golden_path[-1].args["line_id"]
    attempts = [("find_customer", {"phone": payload, "email": payload}),
                ("verify_identity", {"customer_id": payload, "date_of_birth": payload, "pin": payload}),
                ("add_addon", {"line_id": line, "addon_code": payload}),
                ("change_plan", {"line_id": payload, "plan_code": payload}),
                ("list_lines", {"customer_id": payload})]
    results, digest = asyncio.run(_call_all(task, identify + attempts))
    assert [r.is_error for r in results[2:]] == [True, True, True, True, True]
    assert digest == envs.get_domain("telecom").database.state_hash


def test_injection_text_in_a_free_text_field_is_stored_verbatim(telecom_tasks: list[Task]) -> None:
    task = first_task(telecom_tasks, "large_credit")
    customer = task.golden_path[1].args["customer_id"]

    async def episode() -> tuple[str, int]:
        session = await envs.open_session(task)
        for c in task.golden_path[:2]:
            await session.call_tool(c.tool, c.args)
        result = await session.call_tool("open_ticket", {"customer_id": customer, "category": "billing",
                                                         "summary": INJECTIONS[1]})
        ticket = json.loads(result.content[0].text)["ticket_id"]
        row = session.sandbox.one("SELECT summary FROM tickets WHERE ticket_id = ?", (ticket,))
        lines = session.sandbox.one("SELECT COUNT(*) AS n FROM lines")["n"]
        await session.close()
        return row["summary"], lines

    summary, lines = asyncio.run(episode())
    assert summary == INJECTIONS[1]
    assert lines == envs.get_domain("telecom").database.read("SELECT COUNT(*) AS n FROM lines")[0]["n"]


def test_concurrent_episodes_of_one_task_never_see_each_others_writes(telecom_tasks: list[Task]) -> None:
    task = first_task(telecom_tasks, "enable_roaming")
    line = task.golden_path[-1].args["line_id"]
    customer = task.golden_path[1].args["customer_id"]

    async def episode(i: int) -> tuple[bool, bool]:
        session = await envs.open_session(task)
        for c in task.golden_path[:2]:
            await session.call_tool(c.tool, c.args)
        if i % 2 == 0:
            await session.call_tool("set_roaming", {"line_id": line, "enabled": True})
        await asyncio.sleep(0)  # let the other episodes write in between
        seen = await session.call_tool("list_lines", {"customer_id": customer})
        roaming = next(x for x in json.loads(seen.content[0].text) if x["line_id"] == line)["roaming_enabled"]
        verdict = await session.close()
        return roaming, verdict.passed

    async def all_episodes() -> list[tuple[bool, bool]]:
        return await asyncio.gather(*(episode(i) for i in range(40)))

    outcomes = asyncio.run(all_episodes())
    assert outcomes == [(i % 2 == 0, i % 2 == 0) for i in range(40)]


def test_sessions_close_in_any_order(telecom_tasks: list[Task]) -> None:
    async def run() -> list[bool]:
        sessions = [await envs.open_session(t) for t in telecom_tasks[:5]]
        return [(await s.close()).passed for s in sessions]  # FIFO, not LIFO

    assert len(asyncio.run(run())) == 5
