"""What every library tool shares: parameter types, the verified-member gate and the unpaid fines total.

The desk console refuses only what is physically or factually impossible (a record that does not exist, a
member not verified in this conversation). Library rules (limits, windows, approvals, privacy) are left to
the agent under the policy, so the final state shows whether it followed them.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from envs.sdk import CallerGate, Sandbox

MemberId = Annotated[str, Field(description="member id, e.g. M-100001 (from find_member)")]
ItemId = Annotated[str, Field(description="catalogue item id, e.g. IT-50001 (from search_catalogue)")]
LoanId = Annotated[str, Field(description="loan id, e.g. LN-300001 (from list_loans)")]
BranchId = Annotated[str, Field(description="branch id, e.g. CEN (from list_branches)")]
Summary = Annotated[str, Field(description="short note in your own words of what was asked and why")]


GATE = CallerGate("members", "member_id", MemberId,
                  "member {} has not been verified in this conversation; call verify_member first")


def unpaid_cents(db: Sandbox, member_id: str) -> int:
    """The member's unpaid fines, summed."""
    row = db.one("SELECT owed_cents FROM member_balances WHERE member_id = ?", (member_id,))
    return row["owed_cents"] if row else 0
