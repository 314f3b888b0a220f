"""What every clinic tool shares: id parameter types and the two hard checks.

The desk software refuses only what is physically impossible or unsafe for privacy: unknown records and
patients not verified in this conversation. Everything else (windows, referrals, waiver limits) is policy,
so the final state shows whether the agent applied it.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from envs.sdk import CallerGate, Sandbox, present

PatientId = Annotated[str, Field(description="patient id, e.g. PT-100042 (from find_patient)")]
AppointmentId = Annotated[str, Field(description="appointment id, e.g. AP-200317 (from list_appointments)")]
PractitionerId = Annotated[str, Field(description="practitioner id, e.g. PR-101 (from list_practitioners)")]

GATE = CallerGate("patients", "patient_id", PatientId,
                  "patient {} has not been verified in this conversation; call verify_patient")


def found(row: dict[str, Any] | None, what: str) -> dict[str, Any]:
    """`row`, or a refusal naming what was looked for."""
    return present(row, f"{what} not found")


def owned(db: Sandbox, table: str, key_column: str, key: str) -> dict[str, Any]:
    """A row of `table` that belongs to a verified patient (tables carry a patient_id column)."""
    row = found(db.one(f"SELECT * FROM {table} WHERE {key_column} = ?", (key,)), key)
    GATE.require(db, row["patient_id"])
    return row
