"""What every clinic tool shares: id parameter types, the verified-patient gate and the patient's visits.

The desk software refuses only what is physically impossible or unsafe for privacy: unknown records and
patients not verified in this conversation. Everything else (windows, referrals, waiver limits) is policy,
so the final state shows whether the agent applied it.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from envs.sdk import CallerGate, Sandbox

PatientId = Annotated[str, Field(description="patient id, e.g. PT-100042 (from find_patient)")]
AppointmentId = Annotated[str, Field(description="appointment id, e.g. AP-200317 (from list_appointments)")]
PractitionerId = Annotated[str, Field(description="practitioner id, e.g. PR-101 (from list_practitioners)")]

GATE = CallerGate("patients", "patient_id", PatientId,
                  "patient {} has not been verified in this conversation; call verify_patient")


def owned_appointment(db: Sandbox, appointment_id: str) -> dict[str, Any]:
    """The appointment, once the patient it belongs to is verified in this conversation."""
    return GATE.owned(db, db.one("SELECT * FROM appointments WHERE appointment_id = ?", (appointment_id,)),
                      f"{appointment_id} not found")
