"""What every desk tool shares: looking records up, the verified-member gate and parameter types.

The desk console refuses only what is physically or factually impossible (a record that does not exist, a
member not verified in this conversation). Library rules (limits, windows, approvals, privacy) are left to
the agent under the policy, so the final state shows whether it followed them.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from envs.sdk import CallerGate, Sandbox, ToolError

MemberId = Annotated[str, Field(description="member id, e.g. M-100001 (from find_member)")]
ItemId = Annotated[str, Field(description="catalogue item id, e.g. IT-50001 (from search_catalogue)")]
LoanId = Annotated[str, Field(description="loan id, e.g. LN-300001 (from list_loans)")]
BranchId = Annotated[str, Field(description="branch id, e.g. CEN (from list_branches)")]
Summary = Annotated[str, Field(description="short note in your own words of what was asked and why")]


GATE = CallerGate("members", "member_id", MemberId,
                  "member {} has not been verified in this conversation; call verify_member first")


def fetch(db: Sandbox, table: str, key_column: str, key: str) -> dict[str, Any]:
    """One row by primary key, or a refusal naming what was not found.

    `table` and `key_column` are always literals from this package, never agent input.
    """
    row = db.one(f"SELECT * FROM {table} WHERE {key_column} = ?", (key,))
    if row is None:
        raise ToolError(f"no {key_column} {key!r} in {table}")
    return row


def unpaid_cents(db: Sandbox, member_id: str) -> int:
    row = db.one("SELECT COALESCE(SUM(amount_cents), 0) AS owed FROM fines WHERE member_id = ? AND status = ?",
                 (member_id, "unpaid"))
    return row["owed"] if row else 0
