"""The service desk's shared tools (envs/service_desk.py), in every built-in domain that uses them, through real
MCP sessions: the verification tool admits only a caller whose stated facts match, and says the same whether
the id or a fact is wrong; gated tools refuse until then; escalations start pending when a decision is needed,
store the amount in cents, and leave their free text out of the graded state. Every desk shows money as dollars:
no tool result on a golden path carries a `_cents` field, and every `_usd` field is a dollar string. A record the
agent names that does not exist is refused in the same words everywhere, and a caller's record stays shut
until that caller is verified."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

import envs
from envs.domains.clinic.tools_billing import REQUESTS
from envs.domains.telecom.tools import TICKETS
from envs.domains.ticketing.tools_actions import CASES as TICKETING_CASES
from envs.domains.utility.tools_actions import CASES as UTILITY_CASES
from envs.registry import get_domain
from envs.service_desk import Escalations
from envs.tasks import Task, ToolCall

ESCALATIONS = {"telecom": (TICKETS, "open_ticket"), "clinic": (REQUESTS, "open_request"),
               "ticketing": (TICKETING_CASES, "open_case"), "utility": (UTILITY_CASES, "open_case")}


def _verification(task: Task, escalations: Escalations) -> ToolCall | None:
    return next((c for c in task.golden_path
                 if c.tool.startswith("verify_") and escalations.gate.id_column in c.args), None)


def _text(result: object) -> str:
    return result.content[0].text  # type: ignore[attr-defined]


async def _desk_calls(domain: str, escalations: Escalations, tool: str) -> dict[str, object]:
    task, verify = next((t, v) for t in envs.load_tasks(domain) if (v := _verification(t, escalations)))
    caller = verify.args[escalations.gate.id_column]
    proof = next(name for name in verify.args if name != escalations.gate.id_column)
    opening = {escalations.gate.id_column: caller, escalations.text_column: "the caller asked for it",
               "subject_id": None}
    session = await envs.open_session(task)
    seen = {
        "wrong fact": await session.call_tool(verify.tool, {**verify.args, proof: verify.args[proof] + "9"}),
        "unknown id": await session.call_tool(verify.tool, {**verify.args, escalations.gate.id_column: "NOBODY"}),
        "before": await session.call_tool(tool, {**opening, "category": escalations.needs_decision[0]}),
        "verified": await session.call_tool(verify.tool, verify.args),
    }
    seen["pending"] = await session.call_tool(tool, {**opening, "category": escalations.needs_decision[0],
                                                     "amount_usd": 12.5})
    routine = next(c for c in escalations.categories if c not in escalations.needs_decision)
    seen["open"] = await session.call_tool(tool, {**opening, "category": routine})
    seen["rows"] = session.sandbox.query(f"SELECT * FROM {escalations.table} WHERE {escalations.record_id} IN (?, ?)",
                                         tuple(json.loads(_text(seen[k]))[escalations.record_id]
                                               for k in ("pending", "open")))
    seen["caller"] = caller
    seen["graded"] = get_domain(domain).database.tables[escalations.table].graded_columns
    await session.close()
    return seen


@pytest.mark.parametrize("domain", sorted(ESCALATIONS))
def test_verification_gates_and_escalations_in_every_desk(domain: str) -> None:
    escalations, tool = ESCALATIONS[domain]
    seen = asyncio.run(_desk_calls(domain, escalations, tool))
    wrong, unknown = seen["wrong fact"], seen["unknown id"]
    assert wrong.is_error and unknown.is_error  # type: ignore[attr-defined]
    assert _text(wrong) == _text(unknown) and "verif" in _text(wrong)  # neither says which part was wrong
    assert seen["before"].is_error and seen["caller"] in _text(seen["before"])  # type: ignore[attr-defined]
    assert json.loads(_text(seen["verified"])) == {escalations.gate.id_column: seen["caller"], "verified": True}
    pending, opened = (json.loads(_text(seen[k])) for k in ("pending", "open"))
    assert (pending["status"], opened["status"]) == ("pending_approval", "open")
    rows = {row[escalations.record_id]: row for row in seen["rows"]}  # type: ignore[union-attr]
    stored = rows[pending[escalations.record_id]]
    assert stored["amount_cents"] == 1250 and stored[escalations.gate.id_column] == seen["caller"]
    assert stored[escalations.text_column] == "the caller asked for it"
    assert rows[opened[escalations.record_id]]["amount_cents"] is None
    # the domain declared its escalations once: their free text is left out of the graded state, the rest is in
    assert escalations.text_column not in seen["graded"] and "category" in seen["graded"]  # type: ignore[operator]


def test_a_decision_category_the_agent_cannot_choose_is_refused_at_declaration() -> None:
    with pytest.raises(ValueError, match="refund_aproval"):
        Escalations(TICKETS.gate, "cases", "case_id", "CS", categories=("refund_approval", "billing"),
                    needs_decision=("refund_aproval",), text_column="summary")


def _fields(value: Any) -> Iterator[tuple[str, Any]]:
    """Every (field name, value) pair of a JSON tool result, depth first."""
    if isinstance(value, dict):
        for name, inner in value.items():
            yield name, inner
            yield from _fields(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _fields(inner)


async def _money_fields(domain: str) -> tuple[set[str], list[tuple[str, Any]]]:
    """(the tools called, every money field they returned) along one golden path per template."""
    tools: set[str] = set()
    fields: list[tuple[str, Any]] = []
    for task in {t.template: t for t in envs.load_tasks(domain)}.values():
        session = await envs.open_session(task)
        for call in task.golden_path:
            result = await session.call_tool(call.tool, call.args)
            tools.add(call.tool)
            fields += [f for f in _fields(json.loads(_text(result))) if f[0].endswith(("_cents", "_usd"))]
        await session.close()
    return tools, fields


@pytest.mark.parametrize("domain", ["clinic", "library", "telecom", "ticketing", "utility"])
def test_every_desk_shows_money_as_dollar_strings(domain: str) -> None:
    tools, fields = asyncio.run(_money_fields(domain))
    assert len(tools) >= 5 and len(fields) >= 10, (tools, fields)
    assert not [name for name, _ in fields if name.endswith("_cents")]
    assert all(v is None or re.fullmatch(r"-?\d+\.\d{2,3}", v) for _, v in fields), fields


# per desk: a tool taking a record of the caller's, that record's table and key, the desk's refusal of a missing
# one (each desk words its own) and the tool's other arguments
OWNED_RECORDS = {
    "clinic": ("cancel_appointment", "appointments", "appointment_id", "NO-SUCH-ID not found", {}),
    "library": ("renew_loan", "loans", "loan_id", "no loan_id 'NO-SUCH-ID' in loans", {}),
    "telecom": ("suspend_line", "lines", "line_id", "line NO-SUCH-ID not found", {"reason": "lost_device"}),
    "ticketing": ("refund_order", "orders", "order_id", "order NO-SUCH-ID not found",
                  {"include_fees": False, "reason": "asked"}),
    "utility": ("open_dispute", "bills", "bill_id", "bill NO-SUCH-ID does not exist",
                {"category": "other", "details": "asked"}),
}


async def _owned_record_calls(domain: str) -> tuple[str, str, str]:
    tool, table, key, _, others = OWNED_RECORDS[domain]
    session = await envs.open_session(envs.load_tasks(domain)[0])
    real = session.sandbox.query(f"SELECT {key} FROM {table} ORDER BY {key} LIMIT 1")[0][key]
    missing = await session.call_tool(tool, {key: "NO-SUCH-ID", **others})
    unverified = await session.call_tool(tool, {key: real, **others})
    await session.close()
    assert missing.is_error and unverified.is_error
    return real, _text(missing), _text(unverified)


@pytest.mark.parametrize("domain", sorted(OWNED_RECORDS))
def test_every_desk_refuses_a_missing_record_and_a_record_of_an_unverified_caller(domain: str) -> None:
    real, missing, unverified = asyncio.run(_owned_record_calls(domain))
    assert missing.endswith(OWNED_RECORDS[domain][3]), missing
    assert "verif" in unverified and real not in unverified, unverified  # the owner is named, not the record
