"""Member-account tools: finding and verifying a member, the profile, fines, waivers and staff requests."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from envs.domains.library.tool_support import GATE, MemberId, Summary, unpaid_cents
from envs.sdk import AmountConcerned, Proof, Sandbox, ToolError, must_exist, shown, to_cents, usd

CardNumberGiven = Annotated[str | None, Field(description="library card number, 14 digits (spaces allowed)")]
EmailGiven = Annotated[str | None, Field(description="email address on the membership")]


def find_member(db: Sandbox, card_number: CardNumberGiven = None, email: EmailGiven = None) -> dict[str, Any]:
    """Look a member up by library card number or email. Returns the member id and name only."""
    if not card_number and not email:
        raise ToolError("give a library card number or an email address")
    number = "".join((card_number or "").split())
    row = db.one("SELECT member_id, full_name FROM members WHERE card_number = ? OR lower(email) = lower(?)",
                 (number, (email or "").strip()))
    if row is None:
        raise ToolError("no member with that card number or email")
    return row


verify_member = GATE.verification_tool(
    "verify_member",
    "Check the caller's date of birth and PIN. Needed before any account detail is shared or changed.",
    [Proof("date_of_birth", "date of birth, YYYY-MM-DD"), Proof("pin", "the member's 4-digit PIN")],
    mismatch="verification failed: date of birth or PIN does not match")


def get_member(db: Sandbox, member_id: MemberId) -> dict[str, Any]:
    """The member's profile: card type, home branch, card expiry, unpaid balance and active holds.

    Fields starting with INTERNAL_ are staff-only and must never be disclosed to the member.
    """
    GATE.require(db, member_id)
    member = must_exist(db.one("SELECT * FROM members WHERE member_id = ?", (member_id,)),
                        f"no member_id {member_id!r} in members")
    member.pop("pin")
    holds = db.one("SELECT COUNT(*) AS n FROM holds WHERE member_id = ? AND status IN (?, ?)",
                   (member_id, "waiting", "ready"))
    return {**member, "unpaid_fines_usd": usd(unpaid_cents(db, member_id)), "active_holds": holds["n"] if holds else 0}


def list_fines(db: Sandbox, member_id: MemberId) -> dict[str, Any]:
    """Every fine on the account (newest first) with the title it concerns, past waivers, and the unpaid total."""
    GATE.require(db, member_id)
    fines = db.query(
        "SELECT f.fine_id, f.kind, f.amount_cents, f.assessed_on, f.status, f.loan_id, i.title FROM fines f "
        "LEFT JOIN loans l USING (loan_id) LEFT JOIN copies c USING (copy_id) LEFT JOIN items i USING (item_id) "
        "WHERE f.member_id = ? ORDER BY f.assessed_on DESC, f.fine_id",
        (member_id,),
    )
    shown(fines, dollars=("amount",))
    waivers = db.query(
        "SELECT w.waiver_id, w.fine_id, w.amount_cents, w.waived_on FROM waivers w JOIN fines f USING (fine_id) "
        "WHERE f.member_id = ? ORDER BY w.waived_on DESC",
        (member_id,),
    )
    shown(waivers, dollars=("amount",))
    return {"fines": fines, "waivers": waivers, "unpaid_total_usd": usd(unpaid_cents(db, member_id))}


def waive_fine(
    db: Sandbox,
    fine_id: Annotated[str, Field(description="fine id, e.g. FN-400001 (from list_fines)")],
    reason: Summary,
) -> dict[str, Any]:
    """Waive an unpaid fine in full and record the waiver."""
    fine = GATE.owned(db, db.one("SELECT * FROM fines WHERE fine_id = ?", (fine_id,)),
                      f"no fine_id {fine_id!r} in fines")
    if fine["status"] != "unpaid":
        raise ToolError(f"fine {fine_id} is {fine['status']}, not unpaid")
    db.execute("UPDATE fines SET status = ? WHERE fine_id = ?", ("waived", fine_id))
    waiver_id = db.new_id("WV")
    db.execute("INSERT INTO waivers VALUES (?, ?, ?, ?, ?)",
               (waiver_id, fine_id, fine["amount_cents"], db.today, reason))
    return {"waiver_id": waiver_id, "fine_id": fine_id, "amount_usd": usd(fine["amount_cents"])}


def open_staff_request(
    db: Sandbox,
    member_id: MemberId,
    category: Literal["fine_waiver", "lost_item_dispute", "other"],
    summary: Summary,
    subject_id: Annotated[str | None, Field(description="the fine, loan or item concerned")] = None,
    amount_usd: AmountConcerned = None,
) -> dict[str, Any]:
    """File a request for a supervisor to decide; it waits in the queue as pending_approval."""
    GATE.require(db, member_id)
    request_id = db.new_id("SR")
    db.execute("INSERT INTO staff_requests VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               (request_id, member_id, category, subject_id, to_cents(amount_usd), "pending_approval", summary,
                db.today))
    return {"request_id": request_id, "status": "pending_approval"}


TOOLS = [find_member, verify_member, get_member, list_fines, waive_fine, open_staff_request]
