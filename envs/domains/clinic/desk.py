"""What every clinic tool shares: id parameter types, money formatting and the two hard checks.

The desk software refuses only what is physically impossible or unsafe for privacy: unknown records and
patients not verified in this conversation. Everything else (windows, referrals, waiver limits) is policy,
so the final state shows whether the agent applied it.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from envs.sdk import Sandbox, ToolError

PatientId = Annotated[str, Field(description="patient id, e.g. PT-100042 (from find_patient)")]
AppointmentId = Annotated[str, Field(description="appointment id, e.g. AP-200317 (from list_appointments)")]
PractitionerId = Annotated[str, Field(description="practitioner id, e.g. PR-101 (from list_practitioners)")]

_VERIFIED = "verified_patients"


def dollars(cents: int | None) -> str | None:
    """Cents as a dollar string for the agent, e.g. 4000 -> '40.00'."""
    return None if cents is None else f"{cents / 100:.2f}"


def found(row: dict[str, Any] | None, what: str) -> dict[str, Any]:
    """`row`, or a refusal naming what was looked for."""
    if row is None:
        raise ToolError(f"{what} not found")
    return row


def mark_verified(db: Sandbox, patient_id: str) -> None:
    db.memory.setdefault(_VERIFIED, set()).add(patient_id)


def require_verified(db: Sandbox, patient_id: str) -> None:
    """Refuse unless `patient_id` passed verify_patient earlier in this conversation."""
    if patient_id not in db.memory.get(_VERIFIED, set()):
        raise ToolError(f"patient {patient_id} has not been verified in this conversation; call verify_patient")


def owned(db: Sandbox, table: str, key_column: str, key: str) -> dict[str, Any]:
    """A row of `table` that belongs to a verified patient (tables carry a patient_id column)."""
    row = found(db.one(f"SELECT * FROM {table} WHERE {key_column} = ?", (key,)), key)
    require_verified(db, row["patient_id"])
    return row
