"""Telecom care tools: what a support agent's console can do.

The console enforces only hard facts (records exist, the customer is verified, an amount fits the invoice).
Business rules (windows, limits, approvals, confidentiality) are the agent's job under the policy; the final
state shows whether it followed them. Every refusal is a `ToolError` the agent reads as an error result.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from envs.sdk import CallerGate, Escalations, Proof, Sandbox, ToolError, must_exist, shown, to_cents, usd

CustomerId = Annotated[str, Field(description="customer id, e.g. C-10001 (from find_customer)")]
LineId = Annotated[str, Field(description="line id, e.g. L-20001 (from list_lines)")]
PhoneOnFile = Annotated[str | None, Field(description="phone number on the account, e.g. +1-202-555-1000")]
EmailOnFile = Annotated[str | None, Field(description="email address on the account")]

GATE = CallerGate("customers", "customer_id", CustomerId,
                  "customer {} is not verified in this conversation; call verify_identity first")
TICKETS = Escalations(GATE, "tickets", "ticket_id", "TK",
                      categories=("credit_approval", "roaming_approval", "billing", "network", "device"),
                      needs_decision=("credit_approval", "roaming_approval"), text_column="summary")


def _owned_line(db: Sandbox, line_id: str) -> dict[str, Any]:
    """The line, once the customer it belongs to is verified in this conversation."""
    return GATE.owned(db, db.one("SELECT * FROM lines WHERE line_id = ?", (line_id,)), f"line {line_id} not found")


def find_customer(db: Sandbox, phone: PhoneOnFile = None, email: EmailOnFile = None) -> dict[str, Any]:
    """Find a customer by phone number (any of their lines) or email. Returns the customer id and name."""
    if not phone and not email:
        raise ToolError("give a phone number or an email address")
    row = db.one(
        "SELECT c.customer_id, c.full_name FROM customers c LEFT JOIN lines l ON l.customer_id = c.customer_id "
        "WHERE c.phone = ? OR l.msisdn = ? OR lower(c.email) = lower(?) LIMIT 1",
        (phone, phone, email),
    )
    return must_exist(row, "customer not found")


verify_identity = GATE.verification_tool(
    "verify_identity",
    "Verify the caller's identity with date of birth and PIN. Required before any account detail or change.",
    [Proof("date_of_birth", "date of birth as YYYY-MM-DD"), Proof("pin", "the 4-digit account PIN")],
    mismatch="identity check failed: date of birth or PIN does not match")


def get_customer(db: Sandbox, customer_id: CustomerId) -> dict[str, Any]:
    """The customer's profile, including INTERNAL scores that must never be disclosed to the customer."""
    GATE.require(db, customer_id)
    row = must_exist(db.one("SELECT * FROM customers WHERE customer_id = ?", (customer_id,)), "customer not found")
    row.pop("pin")
    row["INTERNAL_credit_risk_score"] = row.pop("credit_risk_score")
    row["INTERNAL_churn_score"] = row.pop("churn_score")
    return row


def list_lines(db: Sandbox, customer_id: CustomerId) -> list[dict[str, Any]]:
    """The customer's lines with plan, status, contract end, last plan change, data used, roaming and add-ons."""
    GATE.require(db, customer_id)
    lines = db.query(
        "SELECT l.*, p.name AS plan_name, p.monthly_fee_cents FROM lines l JOIN plans p USING (plan_code) "
        "WHERE l.customer_id = ? ORDER BY l.line_id",
        (customer_id,),
    )
    for line in lines:
        shown(line, dollars=("monthly_fee",), flags=("roaming_enabled",))
        line["addons"] = [r["addon_code"] for r in db.query(
            "SELECT addon_code FROM line_addons WHERE line_id = ? ORDER BY addon_code", (line["line_id"],))]
    return lines


def list_devices(db: Sandbox, customer_id: CustomerId) -> list[dict[str, Any]]:
    """Devices on the customer's lines, with purchase date, price and insurance status."""
    GATE.require(db, customer_id)
    devices = db.query(
        "SELECT d.* FROM devices d JOIN lines l USING (line_id) WHERE l.customer_id = ? ORDER BY d.device_id",
        (customer_id,),
    )
    return shown(devices, dollars=("price",), flags=("insured",))


def list_plans(db: Sandbox) -> list[dict[str, Any]]:
    """The plan catalogue with monthly fees; legacy plans (is_active false) are closed to new selections."""
    plans = db.query("SELECT * FROM plans ORDER BY monthly_fee_cents")
    return shown(plans, dollars=("monthly_fee",), flags=("is_active",))


def list_invoices(db: Sandbox, customer_id: CustomerId) -> list[dict[str, Any]]:
    """The customer's invoices, newest first, with credits already applied to each."""
    GATE.require(db, customer_id)
    invoices = db.query("SELECT invoice_id, customer_id, issued_on, due_on, amount_cents, status, credited_cents "
                        "FROM invoice_balances WHERE customer_id = ? ORDER BY issued_on DESC", (customer_id,))
    return shown(invoices, dollars=("amount", "credited"))


def change_plan(
    db: Sandbox, line_id: LineId, plan_code: Annotated[str, Field(description="target plan code, e.g. PLUS20")]
) -> dict[str, Any]:
    """Move a line to another plan (takes effect today and is logged in the plan history)."""
    line = _owned_line(db, line_id)
    must_exist(db.one("SELECT plan_code FROM plans WHERE plan_code = ?", (plan_code,)), f"plan {plan_code} not found")
    if line["plan_code"] == plan_code:
        raise ToolError(f"line {line_id} is already on {plan_code}")
    db.execute("UPDATE lines SET plan_code = ?, last_plan_change = ? WHERE line_id = ?", (plan_code, db.today, line_id))
    db.execute("INSERT INTO plan_changes VALUES (?, ?, ?, ?, ?)",
               (db.new_id("PC"), line_id, line["plan_code"], plan_code, db.today))
    return {"line_id": line_id, "old_plan": line["plan_code"], "new_plan": plan_code, "effective": db.today}


def set_roaming(db: Sandbox, line_id: LineId, enabled: bool) -> dict[str, Any]:
    """Turn international roaming on or off for a line."""
    _owned_line(db, line_id)
    db.execute("UPDATE lines SET roaming_enabled = ? WHERE line_id = ?", (int(enabled), line_id))
    return {"line_id": line_id, "roaming_enabled": enabled}


def add_addon(
    db: Sandbox, line_id: LineId, addon_code: Annotated[str, Field(description="add-on code, e.g. HOTSPOT")]
) -> dict[str, Any]:
    """Add a monthly add-on to a line."""
    _owned_line(db, line_id)
    must_exist(db.one("SELECT addon_code FROM addons WHERE addon_code = ?", (addon_code,)),
               f"add-on {addon_code} not found")
    if db.one("SELECT 1 AS x FROM line_addons WHERE line_id = ? AND addon_code = ?", (line_id, addon_code)):
        raise ToolError(f"line {line_id} already has {addon_code}")
    db.execute("INSERT INTO line_addons VALUES (?, ?, ?)", (line_id, addon_code, db.today))
    return {"line_id": line_id, "added": addon_code}


def remove_addon(db: Sandbox, line_id: LineId, addon_code: str) -> dict[str, Any]:
    """Remove an add-on from a line."""
    _owned_line(db, line_id)
    if not db.execute("DELETE FROM line_addons WHERE line_id = ? AND addon_code = ?", (line_id, addon_code)):
        raise ToolError(f"line {line_id} has no add-on {addon_code}")
    return {"line_id": line_id, "removed": addon_code}


def suspend_line(
    db: Sandbox, line_id: LineId, reason: Literal["lost_device", "stolen_device", "customer_request"]
) -> dict[str, Any]:
    """Suspend a line immediately (calls and data stop until it is restored)."""
    line = _owned_line(db, line_id)
    if line["status"] == "suspended":
        raise ToolError(f"line {line_id} is already suspended")
    db.execute("UPDATE lines SET status = ?, suspension_reason = ? WHERE line_id = ?", ("suspended", reason, line_id))
    return {"line_id": line_id, "status": "suspended", "reason": reason}


def add_device_insurance(
    db: Sandbox, device_id: Annotated[str, Field(description="device id, e.g. D-30001 (from list_devices)")]
) -> dict[str, Any]:
    """Add device insurance to a device."""
    device = must_exist(db.one("SELECT * FROM devices WHERE device_id = ?", (device_id,)),
                        f"device {device_id} not found")
    _owned_line(db, device["line_id"])
    if device["insured"]:
        raise ToolError(f"device {device_id} is already insured")
    db.execute("UPDATE devices SET insured = 1 WHERE device_id = ?", (device_id,))
    return {"device_id": device_id, "insured": True}


def issue_credit(
    db: Sandbox,
    invoice_id: Annotated[str, Field(description="invoice id, e.g. INV-40001")],
    amount_usd: Annotated[float, Field(gt=0, description="credit in US dollars, e.g. 12.50")],
    reason: Annotated[str, Field(description="short reason shown on the customer's bill")],
) -> dict[str, Any]:
    """Apply a bill credit to an invoice."""
    invoice = GATE.owned(db, db.one("SELECT * FROM invoices WHERE invoice_id = ?", (invoice_id,)),
                         f"invoice {invoice_id} not found")
    cents = to_cents(amount_usd)
    if cents > invoice["amount_cents"]:
        raise ToolError(f"credit {usd(cents)} exceeds the invoice amount {usd(invoice['amount_cents'])}")
    credit_id = db.new_id("CR")
    db.execute("INSERT INTO credits VALUES (?, ?, ?, ?, ?)", (credit_id, invoice_id, cents, reason, db.today))
    return {"credit_id": credit_id, "invoice_id": invoice_id, "amount_usd": usd(cents)}


open_ticket = TICKETS.tool(
    "open_ticket", "Open a ticket. Approval categories are created as pending_approval for a supervisor to decide.",
    text="what the customer asked for and why", subject="the invoice, line or device concerned")


TOOLS = [find_customer, verify_identity, get_customer, list_lines, list_devices, list_plans, list_invoices,
         change_plan, set_roaming, add_addon, remove_addon, suspend_line, add_device_insurance, issue_credit,
         open_ticket]
