"""Verifier: same state by different valid orders, side effects anywhere fail with a diff that names them."""

from __future__ import annotations

import asyncio

import pytest

import envs
from envs.domain import Domain
from envs.tasks import Task
from envs.verdict import Verdict
from tests.envs.support import first_task


async def _run(task: Task, calls: list[tuple[str, dict]], reply: str = "") -> Verdict:
    session = await envs.open_session(task)
    for name, args in calls:
        result = await session.call_tool(name, args)
        assert not result.is_error, result.content
    return await session.close(reply)


def _golden(task: Task) -> list[tuple[str, dict]]:
    return [(c.tool, dict(c.args)) for c in task.golden_path]


def test_two_valid_orders_reach_the_same_hash(telecom: Domain, telecom_tasks: list[Task]) -> None:
    task = first_task(telecom_tasks, "small_credit")
    customer, invoice = task.golden_path[1].args["customer_id"], task.golden_path[-1].args["invoice_id"]
    ticket = ("open_ticket", {"customer_id": customer, "category": "billing", "summary": "x"})
    credit = ("issue_credit", {"invoice_id": invoice, "amount_usd": 5.0, "reason": "a"})
    orders = [[credit, ticket], [ticket, credit]]
    hashes = set()
    for extra in orders:
        sandbox = telecom.new_sandbox(task.initial_patch)
        for name, args in [*_golden(task)[:2], *extra]:
            telecom.invoke(sandbox, name, args)
        hashes.add(sandbox.state_hash())
        sandbox.close()
    assert len(hashes) == 1


def test_oracle_passes_and_reordered_reads_still_pass(telecom_tasks: list[Task]) -> None:
    task = first_task(telecom_tasks, "enable_roaming")
    calls = _golden(task)
    reordered = [calls[0], calls[1], ("list_plans", {}), calls[-1], *calls[2:-1]]  # reads after the write
    assert asyncio.run(_run(task, calls)).passed
    verdict = asyncio.run(_run(task, reordered))
    assert verdict.passed and verdict.diff == []


def test_extra_write_through_a_tool_fails_with_a_diff_naming_it(telecom: Domain, telecom_tasks: list[Task]) -> None:
    task = first_task(telecom_tasks, "upgrade_plan")
    line_id = task.golden_path[-1].args["line_id"]
    before = telecom.database.read("SELECT roaming_enabled FROM lines WHERE line_id = ?", (line_id,))[0]
    was = before["roaming_enabled"]
    calls = [*_golden(task), ("set_roaming", {"line_id": line_id, "enabled": not was})]
    verdict = asyncio.run(_run(task, calls))
    assert not verdict.passed and verdict.system_error is None
    assert [(d.change, d.table, d.key, d.column, d.expected, d.actual) for d in verdict.diff] == [
        ("changed_value", "lines", [line_id], "roaming_enabled", was, 1 - was)]
    assert f"lines[{line_id}].roaming_enabled" in verdict.report()


def test_side_effect_in_an_unrelated_table_is_caught(telecom_tasks: list[Task]) -> None:
    task = first_task(telecom_tasks, "downgrade_under_contract")

    async def episode() -> Verdict:
        session = await envs.open_session(task)
        session.sandbox.execute("UPDATE plans SET monthly_fee_cents = ? WHERE plan_code = ?", (1, "BASIC5"))
        session.sandbox.execute("INSERT INTO addons VALUES (?, ?, ?)", ("FREEBIE", "Free stuff", 0))
        return await session.close()

    verdict = asyncio.run(episode())
    assert not verdict.passed
    described = {(d.change, d.table, tuple(d.key), d.column) for d in verdict.diff}
    assert described == {("changed_value", "plans", ("BASIC5",), "monthly_fee_cents"),
                         ("unexpected_row", "addons", ("FREEBIE",), None)}


def test_missing_change_is_reported_as_missing_rows_and_values(telecom_tasks: list[Task]) -> None:
    task = first_task(telecom_tasks, "large_credit")
    verdict = asyncio.run(_run(task, _golden(task)[:-1]))  # forgot to open the approval ticket
    assert not verdict.passed
    assert [(d.change, d.table, d.key) for d in verdict.diff] == [("missing_row", "tickets", ["TK-N0001"])]
    assert verdict.diff[0].expected["status"] == "pending_approval"


def test_doing_the_forbidden_change_fails(telecom_tasks: list[Task]) -> None:
    task = first_task(telecom_tasks, "large_credit")
    invoice = task.golden_path[-1].args["subject_id"]
    amount = task.golden_path[-1].args["amount_usd"]
    calls = [*_golden(task)[:-1], ("issue_credit", {"invoice_id": invoice, "amount_usd": amount, "reason": "r"})]
    verdict = asyncio.run(_run(task, calls))
    assert not verdict.passed
    assert {d.table for d in verdict.diff} == {"credits", "tickets"}


def test_information_task_needs_the_answer_and_leak_task_forbids_the_score(telecom_tasks: list[Task]) -> None:
    info = first_task(telecom_tasks, "plan_and_fee")
    assert asyncio.run(_run(info, _golden(info), info.reference_answer)).passed
    assert not asyncio.run(_run(info, _golden(info), "I cannot tell you that.")).passed
    leak = first_task(telecom_tasks, "credit_score_request")
    score = leak.rubrics[0].phrases[0]
    leaked = asyncio.run(_run(leak, _golden(leak), f"Your internal score is {score}."))
    assert not leaked.passed and leaked.state_matches
    assert "revealed" in leaked.report()


def test_replies_sent_through_the_session_are_graded(telecom_tasks: list[Task]) -> None:
    task = first_task(telecom_tasks, "contract_end_date")

    async def conversation() -> tuple[list[bool], envs.Verdict]:
        session = await envs.open_session(task)
        asked = await session.user_reply("Please tell me your phone number, date of birth and PIN.")
        for c in task.golden_path:
            await session.call_tool(c.tool, c.args)
        answered = await session.user_reply(task.reference_answer)
        return [asked.done, answered.done], await session.close()

    done, verdict = asyncio.run(conversation())
    assert done == [False, True]  # the scripted user stops once the agent states its answer
    assert verdict.passed and verdict.rubrics[0].passed


def test_unsealed_tasks_are_refused_at_open(telecom_tasks: list[Task]) -> None:
    unsealed = telecom_tasks[0].model_copy(update={"golden_hash": None})
    with pytest.raises(ValueError, match="is not sealed"):
        asyncio.run(envs.open_session(unsealed))
