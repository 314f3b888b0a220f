"""Desk tools about who the patient is: lookup, verification, profile, insurance and pre-authorisations."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field

from envs.domains.clinic.tool_support import GATE, PatientId
from envs.sdk import Proof, Sandbox, ToolError, must_exist, shown, usd

PhoneGiven = Annotated[str | None, Field(description="the patient's phone number, e.g. 503-555-1042")]
EmailGiven = Annotated[str | None, Field(description="the patient's email address")]


def find_patient(db: Sandbox, phone: PhoneGiven = None, email: EmailGiven = None) -> dict[str, Any]:
    """Look a patient up by phone number or email. Returns the patient id and name, nothing else."""
    if not phone and not email:
        raise ToolError("give the patient's phone number or email address")
    digits = re.sub(r"\D", "", phone or "")[-10:]
    row = db.one("SELECT patient_id, full_name FROM patients WHERE replace(phone, ?, ?) = ? OR lower(email) = ?",
                 ("-", "", digits, (email or "").strip().lower()))
    return must_exist(row, "patient not found")


verify_patient = GATE.verification_tool(
    "verify_patient",
    "Verify the caller is the patient: date of birth and home postcode must both match the record.",
    [Proof("date_of_birth", "date of birth, YYYY-MM-DD"), Proof("postcode", "the 5-digit home postcode on file")],
    mismatch="verification failed: date of birth or postcode does not match")


def get_patient(db: Sandbox, patient_id: PatientId) -> dict[str, Any]:
    """The patient's profile: contact details, insurance, preferred pharmacy and INTERNAL scores (confidential)."""
    GATE.require(db, patient_id)
    return must_exist(db.one("SELECT * FROM patients WHERE patient_id = ?", (patient_id,)), "patient not found")


def list_coverage(db: Sandbox, patient_id: PatientId) -> dict[str, Any]:
    """The patient's insurance plan (with its imaging pre-authorisation threshold) and pre-authorisations."""
    GATE.require(db, patient_id)
    plan = must_exist(db.one("SELECT p.member_number, i.* FROM patients p JOIN insurance_plans i USING (plan_code) "
                             "WHERE p.patient_id = ?", (patient_id,)), "patient not found")
    shown(plan, dollars=("preauth_threshold",))
    plan["preauthorisations"] = db.query(
        "SELECT a.auth_id, a.procedure_code, r.name AS procedure, a.status, a.submitted_on, a.decided_on "
        "FROM preauthorisations a JOIN procedures r USING (procedure_code) WHERE a.patient_id = ? "
        "ORDER BY a.submitted_on DESC", (patient_id,))
    return plan


def list_procedures(db: Sandbox) -> list[dict[str, Any]]:
    """The imaging procedure catalogue with list prices in US dollars."""
    rows = db.query("SELECT * FROM procedures ORDER BY list_price_cents")
    return [{"procedure_code": r["procedure_code"], "name": r["name"],
             "list_price_usd": usd(r["list_price_cents"])} for r in rows]


def submit_preauthorisation(
    db: Sandbox,
    patient_id: PatientId,
    procedure_code: Annotated[str, Field(description="procedure code, e.g. MRI_KNEE (from list_procedures)")],
) -> dict[str, Any]:
    """Send a pre-authorisation request to the patient's insurer; it starts as pending until the insurer decides."""
    GATE.require(db, patient_id)
    must_exist(db.one("SELECT procedure_code FROM procedures WHERE procedure_code = ?", (procedure_code,)),
               f"procedure {procedure_code} not found")
    if db.one("SELECT 1 AS x FROM patients WHERE patient_id = ? AND member_number IS NULL", (patient_id,)):
        raise ToolError("the patient is self-pay: there is no insurer to ask")
    if db.one("SELECT auth_id FROM preauthorisations WHERE patient_id = ? AND procedure_code = ? AND status = ?",
              (patient_id, procedure_code, "pending")):
        raise ToolError(f"a pending pre-authorisation for {procedure_code} is already with the insurer")
    auth_id = db.new_id("PA")
    db.execute("INSERT INTO preauthorisations VALUES (?, ?, ?, ?, ?, ?)",
               (auth_id, patient_id, procedure_code, "pending", db.today, None))
    return {"auth_id": auth_id, "procedure_code": procedure_code, "status": "pending"}


TOOLS = [find_patient, verify_patient, get_patient, list_coverage, list_procedures, submit_preauthorisation]
