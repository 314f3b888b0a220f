"""Desk tools for appointment fees and for requests that a manager or prescriber must decide."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from envs.domains.clinic.tool_support import GATE, AppointmentId, PatientId, owned_appointment
from envs.sdk import Escalations, Sandbox, ToolError, must_exist, shown, usd

REQUESTS = Escalations(GATE, "requests", "request_id", "RQ",
                       categories=("fee_waiver_approval", "controlled_refill_review", "scheduling", "billing",
                                   "records"),
                       needs_decision=("fee_waiver_approval", "controlled_refill_review"), text_column="note")


def list_fees(db: Sandbox, patient_id: PatientId) -> list[dict[str, Any]]:
    """Every fee ever charged to the patient (unpaid, paid, waived), newest first, with the visit it concerns."""
    GATE.require(db, patient_id)
    rows = db.query(
        "SELECT f.fee_id, f.kind, f.amount_cents, f.status, f.charged_on, f.waived_on, f.appointment_id, "
        "a.starts_at AS appointment_at, p.full_name AS practitioner FROM fees f "
        "LEFT JOIN appointments a USING (appointment_id) LEFT JOIN practitioners p ON p.practitioner_id = "
        "a.practitioner_id WHERE f.patient_id = ? ORDER BY f.charged_on DESC", (patient_id,))
    return shown(rows, dollars=("amount",))


def charge_fee(
    db: Sandbox, appointment_id: AppointmentId, kind: Literal["late_cancellation", "no_show"]
) -> dict[str, Any]:
    """Charge the practitioner's listed fee for a late cancellation or a missed visit."""
    visit = owned_appointment(db, appointment_id)
    if db.one("SELECT fee_id FROM fees WHERE appointment_id = ?", (appointment_id,)):
        raise ToolError(f"appointment {appointment_id} already has a fee")
    practitioner = must_exist(db.one("SELECT late_fee_cents FROM practitioners WHERE practitioner_id = ?",
                                     (visit["practitioner_id"],)), f"practitioner {visit['practitioner_id']} not found")
    cents = practitioner["late_fee_cents"]
    fee_id = db.new_id("FE")
    db.execute("INSERT INTO fees VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               (fee_id, visit["patient_id"], appointment_id, kind, cents, "unpaid", db.today, None))
    return {"fee_id": fee_id, "kind": kind, "amount_usd": usd(cents), "status": "unpaid"}


def waive_fee(db: Sandbox, fee_id: Annotated[str, Field(description="fee id, e.g. FE-500012 (from list_fees)")]
              ) -> dict[str, Any]:
    """Waive an unpaid fee (the patient no longer owes it)."""
    fee = GATE.owned(db, db.one("SELECT * FROM fees WHERE fee_id = ?", (fee_id,)), f"{fee_id} not found")
    if fee["status"] != "unpaid":
        raise ToolError(f"fee {fee_id} is {fee['status']}; only unpaid fees can be waived")
    db.execute("UPDATE fees SET status = ?, waived_on = ? WHERE fee_id = ?", ("waived", db.today, fee_id))
    return {"fee_id": fee_id, "status": "waived", "amount_usd": usd(fee["amount_cents"])}


open_request = REQUESTS.tool(
    "open_request",
    "Open a request for staff. Approval and review categories wait as pending_approval for a decision.",
    text="what the patient asked for and why", subject="the fee, prescription or appointment concerned")


TOOLS = [list_fees, charge_fee, waive_fee, open_request]
