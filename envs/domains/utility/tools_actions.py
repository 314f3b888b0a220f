"""Console tools that write: readings, tariff switches, adjustments, disputes, plans, field orders, cases.

Each checks only hard facts (the record exists and belongs to a verified holder, a tariff fits the meter's
utility, a credit fits the bill). Whether the change is allowed under policy.md is the agent's decision.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any, Literal

from pydantic import Field

from envs.domains.utility.tool_support import (
    GATE,
    AccountId,
    BillId,
    MeterId,
    owned_bill,
    owned_meter,
    unpaid_balance_cents,
)
from envs.sdk import Escalations, Sandbox, ToolError, days_after, must_exist, to_cents, usd

Dollars = Annotated[float, Field(gt=0, description="amount in US dollars, e.g. 18.75")]


def submit_meter_reading(
    db: Sandbox,
    meter_id: MeterId,
    register: Annotated[int, Field(ge=0, description="the number shown on the meter's register")],
) -> dict[str, Any]:
    """Record a reading the customer took of their own meter today."""
    owned_meter(db, meter_id)
    reading_id = db.new_id("RD")
    db.execute("INSERT INTO readings VALUES (?, ?, ?, ?, ?)", (reading_id, meter_id, db.today, register, "customer"))
    return {"reading_id": reading_id, "meter_id": meter_id, "register": register, "read_on": db.today}


def change_tariff(
    db: Sandbox, meter_id: MeterId, tariff_code: Annotated[str, Field(description="target tariff, e.g. E-TOU")]
) -> dict[str, Any]:
    """Switch a meter to another tariff of the same utility, from today."""
    meter = owned_meter(db, meter_id)
    tariff = must_exist(db.one("SELECT * FROM tariffs WHERE tariff_code = ?", (tariff_code,)),
                        f"tariff {tariff_code} does not exist")
    if tariff["utility"] != meter["utility"]:
        raise ToolError(f"{tariff_code} is a {tariff['utility']} tariff; meter {meter_id} is {meter['utility']}")
    if meter["tariff_code"] == tariff_code:
        raise ToolError(f"meter {meter_id} is already on {tariff_code}")
    db.execute("UPDATE meters SET tariff_code = ?, last_tariff_change = ? WHERE meter_id = ?",
               (tariff_code, db.today, meter_id))
    return {"meter_id": meter_id, "from": meter["tariff_code"], "to": tariff_code, "effective": db.today}


def apply_bill_adjustment(
    db: Sandbox,
    bill_id: BillId,
    amount_usd: Dollars,
    reason: Annotated[str, Field(description="why the credit is given, as printed on the next bill")],
) -> dict[str, Any]:
    """Credit an amount against a bill."""
    bill = owned_bill(db, bill_id)
    cents = to_cents(amount_usd)
    if cents > bill["amount_cents"]:
        raise ToolError(f"an adjustment of {usd(cents)} is larger than the bill ({usd(bill['amount_cents'])})")
    adjustment_id = db.new_id("AD")
    db.execute("INSERT INTO adjustments VALUES (?, ?, ?, ?, ?)", (adjustment_id, bill_id, cents, reason, db.today))
    return {"adjustment_id": adjustment_id, "bill_id": bill_id, "amount_usd": usd(cents)}


def open_dispute(
    db: Sandbox,
    bill_id: BillId,
    category: Literal["high_bill", "estimated_read", "wrong_meter", "other"],
    details: Annotated[str, Field(description="the customer's complaint in a sentence or two")],
) -> dict[str, Any]:
    """Open a formal dispute on a bill; the billing-review team investigates it."""
    owned_bill(db, bill_id)
    dispute_id = db.new_id("DS")
    db.execute("INSERT INTO disputes VALUES (?, ?, ?, ?, ?, ?)",
               (dispute_id, bill_id, category, "open", details, db.today))
    return {"dispute_id": dispute_id, "bill_id": bill_id, "status": "open"}


def create_payment_plan(
    db: Sandbox,
    account_id: AccountId,
    installments: Annotated[int, Field(ge=2, le=24, description="number of monthly installments")],
) -> dict[str, Any]:
    """Spread the account's whole unpaid balance over equal monthly installments, the first due in 14 days."""
    GATE.require(db, account_id)
    total = unpaid_balance_cents(db, account_id)
    if total <= 0:
        raise ToolError(f"account {account_id} has no unpaid balance")
    each = -(-total // installments)  # rounded up to the cent, so the installments cover the balance
    first_due = days_after(db.today, 14)
    plan_id = db.new_id("PP")
    db.execute("INSERT INTO payment_plans VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               (plan_id, account_id, total, installments, each, first_due, "active", db.today))
    return {"plan_id": plan_id, "total_usd": usd(total), "installments": installments, "installment_usd": usd(each),
            "first_due_on": first_due}


def schedule_service_order(
    db: Sandbox,
    meter_id: MeterId,
    order_type: Literal["disconnect", "reconnect", "meter_test"],
    scheduled_for: Annotated[str, Field(description="date of the field visit, YYYY-MM-DD")],
    note: Annotated[str, Field(description="instructions for the field crew")],
    hold_for_review: Annotated[bool, Field(description="create the order on hold for supervisor or "
                                                       "medical-review approval instead of scheduling it")] = False,
) -> dict[str, Any]:
    """Book a field visit for a meter: disconnect, reconnect or accuracy test."""
    meter = owned_meter(db, meter_id)
    try:
        visit = date.fromisoformat(scheduled_for.strip())
    except ValueError as exc:
        raise ToolError(f"scheduled_for must be a date as YYYY-MM-DD, got {scheduled_for!r}") from exc
    if visit.isoformat() < db.today:
        raise ToolError("a field visit cannot be scheduled in the past")
    wanted = {"disconnect": "connected", "reconnect": "disconnected"}.get(order_type)
    if wanted and meter["status"] != wanted:
        raise ToolError(f"meter {meter_id} is {meter['status']}; a {order_type} order needs a {wanted} meter")
    order_id = db.new_id("SO")
    status = "on_hold" if hold_for_review else "scheduled"
    db.execute("INSERT INTO service_orders VALUES (?, ?, ?, ?, ?, ?, ?)",
               (order_id, meter_id, order_type, status, visit.isoformat(), note, db.today))
    return {"order_id": order_id, "meter_id": meter_id, "order_type": order_type, "status": status,
            "scheduled_for": visit.isoformat()}


CASES = Escalations(GATE, "cases", "case_id", "CS",
                    categories=("adjustment_approval", "payment_plan_approval", "billing_enquiry", "meter_issue"),
                    needs_decision=("adjustment_approval", "payment_plan_approval"), text_column="summary")

open_case = CASES.tool(
    "open_case", "Open a case for the back office. Approval categories wait as pending_approval for a supervisor.",
    text="what the customer asked for and why", subject="the bill or meter concerned")
