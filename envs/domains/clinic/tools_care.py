"""Desk tools for referrals and prescriptions: what the patient holds, and sending a refill to the pharmacy."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from envs.domains.clinic.tool_support import GATE, PatientId
from envs.sdk import Sandbox, ToolError, days_after, must_exist, shown


def list_referrals(db: Sandbox, patient_id: PatientId) -> list[dict[str, Any]]:
    """The patient's specialist referrals with expiry date and visits used and left."""
    GATE.require(db, patient_id)
    rows = db.query("SELECT * FROM referrals WHERE patient_id = ? ORDER BY issued_on DESC", (patient_id,))
    for row in rows:
        row["visits_left"] = row["visits_allowed"] - row["visits_used"]
    return rows


def list_prescriptions(db: Sandbox, patient_id: PatientId) -> list[dict[str, Any]]:
    """The patient's prescriptions: refills left, last fill, the date the current supply runs out, controlled."""
    GATE.require(db, patient_id)
    rows = db.query("SELECT * FROM prescriptions WHERE patient_id = ? ORDER BY rx_id", (patient_id,))
    for row in rows:
        row["supply_runs_out_on"] = days_after(row["last_filled_on"], row["days_supply"])
        shown(row, flags=("controlled",))
    return rows


def request_refill(
    db: Sandbox, rx_id: Annotated[str, Field(description="prescription id, e.g. RX-400210 (from list_prescriptions)")]
) -> dict[str, Any]:
    """Send a refill of an active prescription to the patient's preferred pharmacy; uses up one refill."""
    rx = GATE.owned(db, db.one("SELECT * FROM prescriptions WHERE rx_id = ?", (rx_id,)),
                    f"{rx_id} not found")
    if rx["status"] != "active" or rx["refills_left"] < 1:
        raise ToolError(f"prescription {rx_id} has no refills available; the patient needs a new prescription")
    pharmacy = must_exist(db.one("SELECT pharmacy FROM patients WHERE patient_id = ?", (rx["patient_id"],)),
                          f"patient {rx['patient_id']} not found")["pharmacy"]
    db.execute("UPDATE prescriptions SET refills_left = refills_left - 1, last_filled_on = ? WHERE rx_id = ?",
               (db.today, rx_id))
    fill_id = db.new_id("FL")
    db.execute("INSERT INTO fills VALUES (?, ?, ?, ?)", (fill_id, rx_id, db.today, pharmacy))
    return {"fill_id": fill_id, "rx_id": rx_id, "pharmacy": pharmacy, "refills_left": rx["refills_left"] - 1}


TOOLS = [list_referrals, list_prescriptions, request_refill]
