"""What every desk tool shares: looking records up, the verified-member gate, money and parameter types.

The desk console refuses only what is physically or factually impossible (a record that does not exist, a
member not verified in this conversation). Library rules (limits, windows, approvals, privacy) are left to
the agent under the policy, so the final state shows whether it followed them.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from envs.sdk import Sandbox, ToolError

MemberId = Annotated[str, Field(description="member id, e.g. M-100001 (from find_member)")]
ItemId = Annotated[str, Field(description="catalogue item id, e.g. IT-50001 (from search_catalogue)")]
LoanId = Annotated[str, Field(description="loan id, e.g. LN-300001 (from list_loans)")]
BranchId = Annotated[str, Field(description="branch id, e.g. CEN (from list_branches)")]
Summary = Annotated[str, Field(description="short note in your own words of what was asked and why")]


def usd(cents: int | None) -> str | None:
    """Cents as a dollar string for the agent ("12.50"); None stays None."""
    return None if cents is None else f"{cents / 100:.2f}"


def cents(amount_usd: float | None) -> int | None:
    return None if amount_usd is None else round(amount_usd * 100)


def fetch(db: Sandbox, table: str, key_column: str, key: str) -> dict[str, Any]:
    """One row by primary key, or a refusal naming what was not found.

    `table` and `key_column` are always literals from this package, never agent input.
    """
    row = db.one(f"SELECT * FROM {table} WHERE {key_column} = ?", (key,))
    if row is None:
        raise ToolError(f"no {key_column} {key!r} in {table}")
    return row


def require_verified(db: Sandbox, member_id: str) -> None:
    if member_id not in db.memory.get("verified", set()):
        raise ToolError(f"member {member_id} has not been verified in this conversation; call verify_member first")


def mark_verified(db: Sandbox, member_id: str) -> None:
    db.memory.setdefault("verified", set()).add(member_id)


def unpaid_cents(db: Sandbox, member_id: str) -> int:
    row = db.one("SELECT COALESCE(SUM(amount_cents), 0) AS owed FROM fines WHERE member_id = ? AND status = ?",
                 (member_id, "unpaid"))
    return row["owed"] if row else 0
