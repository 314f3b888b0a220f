"""What every utility console tool needs: parameter types, the verified-holder gate and the unpaid balance.

The gate is the one rule the console enforces itself (a real billing system will not open an account to an
unverified caller); every other rule in policy.md is left to the agent so the final state shows its choices.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from envs.sdk import CallerGate, Sandbox

AccountId = Annotated[str, Field(description="account id, e.g. AC-200001 (from find_account)")]
MeterId = Annotated[str, Field(description="meter id, e.g. MT-300001 (from list_service_points)")]
BillId = Annotated[str, Field(description="bill id, e.g. BL-600001 (from list_bills)")]

GATE = CallerGate("accounts", "account_id", AccountId,
                  "account {} has not been verified in this conversation; use verify_holder first")


def owned_meter(db: Sandbox, meter_id: str) -> dict[str, Any]:
    """The meter with its premise's account id, once that account is verified."""
    return GATE.owned(db, db.one("SELECT m.*, p.account_id FROM meters m JOIN premises p USING (premise_id) "
                                 "WHERE m.meter_id = ?", (meter_id,)), f"meter {meter_id} does not exist")


def owned_bill(db: Sandbox, bill_id: str) -> dict[str, Any]:
    """The bill, once its account is verified."""
    return GATE.owned(db, db.one("SELECT * FROM bills WHERE bill_id = ?", (bill_id,)), f"bill {bill_id} does not exist")


def unpaid_balance_cents(db: Sandbox, account_id: str) -> int:
    """The balances of the account's unpaid bills (bill amounts less their adjustments), summed."""
    row = db.one("SELECT COALESCE(SUM(balance_cents), 0) AS owed FROM bill_balances "
                 "WHERE account_id = ? AND status = ?", (account_id, "unpaid"))
    return int(row["owed"]) if row else 0
