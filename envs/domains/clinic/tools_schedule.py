"""Desk tools for the appointment book: practitioners, open slots, a patient's visits, booking, cancelling."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from envs.domains.clinic.tool_support import GATE, AppointmentId, PatientId, PractitionerId, owned_appointment
from envs.sdk import IsoDate, Sandbox, ToolError, days_after, must_exist, shown

FirstDate = Annotated[IsoDate, Field(description="a date, YYYY-MM-DD")]
LastDate = Annotated[IsoDate | None, Field(description="last date to include, YYYY-MM-DD; default 13 days on")]


def list_practitioners(
    db: Sandbox,
    specialty: Annotated[str | None, Field(description="e.g. Family Medicine, Cardiology; omit for all")] = None,
) -> list[dict[str, Any]]:
    """Practitioners with specialty, whether a referral is required, and their late-cancellation fee."""
    rows = db.query("SELECT * FROM practitioners WHERE ? IS NULL OR lower(specialty) = lower(?) "
                    "ORDER BY practitioner_id", (specialty, specialty))
    return shown(rows, dollars=("late_fee",), flags=("requires_referral",))


def list_open_slots(
    db: Sandbox,
    practitioner_id: PractitionerId,
    from_date: FirstDate,
    to_date: LastDate = None,
) -> list[dict[str, Any]]:
    """Open (bookable) slots of one practitioner between two dates; past slots are never listed."""
    must_exist(db.one("SELECT practitioner_id FROM practitioners WHERE practitioner_id = ?", (practitioner_id,)),
               f"practitioner {practitioner_id} not found")
    last = to_date or days_after(from_date, 13)
    return db.query(
        "SELECT slot_id, starts_at, minutes FROM slots WHERE practitioner_id = ? AND status = ? "
        "AND substr(starts_at, 1, 10) BETWEEN max(?, ?) AND ? ORDER BY starts_at LIMIT 80",
        (practitioner_id, "open", from_date, db.today, last))


def list_appointments(
    db: Sandbox,
    patient_id: PatientId,
    include_past: Annotated[bool, Field(description="also list past and cancelled visits")] = False,
) -> list[dict[str, Any]]:
    """The patient's appointments (upcoming booked ones by default) with practitioner and specialty."""
    GATE.require(db, patient_id)
    return db.query(
        "SELECT a.appointment_id, a.starts_at, a.status, a.practitioner_id, p.full_name AS practitioner, "
        "p.specialty, a.procedure_code, a.referral_id, a.cancelled_on FROM appointments a "
        "JOIN practitioners p USING (practitioner_id) WHERE a.patient_id = ? "
        "AND (? OR (a.status = ? AND a.starts_at >= ?)) ORDER BY a.starts_at",
        (patient_id, include_past, "booked", db.today))


def book_appointment(
    db: Sandbox,
    patient_id: PatientId,
    slot_id: Annotated[str, Field(description="open slot id, e.g. SL-800123 (from list_open_slots)")],
    referral_id: Annotated[str | None, Field(description="the referral this specialist visit uses")] = None,
    procedure_code: Annotated[str | None, Field(description="imaging procedure code, for Diagnostic Imaging")] = None,
) -> dict[str, Any]:
    """Book an open slot for the patient. A referral passed here has one of its visits used up."""
    GATE.require(db, patient_id)
    slot = must_exist(db.one("SELECT * FROM slots WHERE slot_id = ?", (slot_id,)), f"slot {slot_id} not found")
    if slot["status"] != "open" or slot["starts_at"][:10] < db.today:
        raise ToolError(f"slot {slot_id} is not open for booking")
    if referral_id is not None:
        referral = GATE.owned(db, db.one("SELECT * FROM referrals WHERE referral_id = ?", (referral_id,)),
                              f"{referral_id} not found")
        if referral["patient_id"] != patient_id:
            raise ToolError(f"referral {referral_id} belongs to another patient")
        db.execute("UPDATE referrals SET visits_used = visits_used + 1 WHERE referral_id = ?", (referral_id,))
    if procedure_code is not None:
        must_exist(db.one("SELECT procedure_code FROM procedures WHERE procedure_code = ?", (procedure_code,)),
                   f"procedure {procedure_code} not found")
    appointment_id = db.new_id("AP")
    db.execute("UPDATE slots SET status = ? WHERE slot_id = ?", ("booked", slot_id))
    db.execute("INSERT INTO appointments VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
               (appointment_id, patient_id, slot["practitioner_id"], slot_id, slot["starts_at"], referral_id,
                procedure_code, "booked", db.today, None))
    return {"appointment_id": appointment_id, "starts_at": slot["starts_at"], "status": "booked"}


def cancel_appointment(db: Sandbox, appointment_id: AppointmentId) -> dict[str, Any]:
    """Cancel an upcoming booked appointment, release its slot and give back its referral visit. Charges no fee."""
    visit = owned_appointment(db, appointment_id)
    if visit["status"] != "booked" or visit["starts_at"][:10] < db.today:
        raise ToolError(f"appointment {appointment_id} is not an upcoming booked appointment")
    db.execute("UPDATE appointments SET status = ?, cancelled_on = ? WHERE appointment_id = ?",
               ("cancelled", db.today, appointment_id))
    db.execute("UPDATE slots SET status = ? WHERE slot_id = ?", ("open", visit["slot_id"]))
    if visit["referral_id"] is not None:  # the referral visit was never used
        db.execute("UPDATE referrals SET visits_used = visits_used - 1 WHERE referral_id = ?", (visit["referral_id"],))
    return {"appointment_id": appointment_id, "status": "cancelled", "starts_at": visit["starts_at"]}


TOOLS = [list_practitioners, list_open_slots, list_appointments, book_appointment, cancel_appointment]
