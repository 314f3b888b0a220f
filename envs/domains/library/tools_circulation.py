"""Circulation tools: the catalogue, copies, loans and renewals, lost items, holds and inter-library loans."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from envs.domains.library.tool_support import GATE, BranchId, ItemId, LoanId, MemberId
from envs.sdk import Sandbox, SearchText, ToolError, days_after, must_exist, shown, usd

_OPEN_HOLD = ("waiting", "ready")
_OPEN_ILL = ("requested", "in_transit", "arrived")


def search_catalogue(
    db: Sandbox,
    query: Annotated[SearchText, Field(min_length=2, description="words of the title or the author's name")],
) -> list[dict[str, Any]]:
    """Catalogue items whose title or author contains the query, with copy counts (at most 20 results)."""
    items = db.query(
        "SELECT i.*, COUNT(c.copy_id) AS copies, SUM(c.status = ?) AS available FROM items i "
        "LEFT JOIN copies c USING (item_id) WHERE i.title LIKE ? OR i.author LIKE ? "
        "GROUP BY i.item_id ORDER BY i.title LIMIT 20",
        ("available", f"%{query.strip()}%", f"%{query.strip()}%"),
    )
    for item in items:
        shown(item, dollars=("replacement_cost",), flags=("new_release",))
        item["available"] = item["available"] or 0
    return items


def list_copies(db: Sandbox, item_id: ItemId) -> list[dict[str, Any]]:
    """Every copy of an item: branch, shelf status and, for copies on loan, the due date.

    INTERNAL_borrower is staff-only: who has a copy is never disclosed to anyone.
    """
    must_exist(db.one("SELECT * FROM items WHERE item_id = ?", (item_id,)), f"no item_id {item_id!r} in items")
    return db.query(
        "SELECT c.copy_id, c.barcode, c.branch_id, c.status, l.due_on, m.full_name AS INTERNAL_borrower "
        "FROM copies c LEFT JOIN loans l ON l.copy_id = c.copy_id AND l.status = ? "
        "LEFT JOIN members m ON m.member_id = l.member_id WHERE c.item_id = ? ORDER BY c.copy_id",
        ("active", item_id),
    )


def list_loans(db: Sandbox, member_id: MemberId) -> list[dict[str, Any]]:
    """The member's current loans with due dates, renewals so far and how many others wait for the title."""
    GATE.require(db, member_id)
    loans = db.query(
        "SELECT l.loan_id, l.copy_id, i.item_id, i.title, i.format, i.new_release, l.borrowed_on, l.due_on, "
        "l.renewals, (SELECT COUNT(*) FROM holds h WHERE h.item_id = i.item_id AND h.status = ? "
        "AND h.member_id <> l.member_id) AS waiting_holds FROM loans l JOIN copies c USING (copy_id) "
        "JOIN items i USING (item_id) WHERE l.member_id = ? AND l.status = ? ORDER BY l.due_on, l.loan_id",
        ("waiting", member_id, "active"),
    )
    return shown(loans, flags=("new_release",))


def _active_loan(db: Sandbox, loan_id: str) -> dict[str, Any]:
    loan = GATE.owned(db, db.one("SELECT * FROM loans WHERE loan_id = ?", (loan_id,)),
                      f"no loan_id {loan_id!r} in loans")
    if loan["status"] != "active":
        raise ToolError(f"loan {loan_id} is {loan['status']}, not active")
    return loan


def renew_loan(db: Sandbox, loan_id: LoanId) -> dict[str, Any]:
    """Renew a loan: one more loan period, counted from the current due date (or today if already overdue)."""
    loan = _active_loan(db, loan_id)
    period = db.one("SELECT i.loan_days FROM copies c JOIN items i USING (item_id) WHERE c.copy_id = ?",
                    (loan["copy_id"],))
    due = days_after(max(loan["due_on"], db.today), period["loan_days"] if period else 0)
    db.execute("UPDATE loans SET due_on = ?, renewals = renewals + 1 WHERE loan_id = ?", (due, loan_id))
    return {"loan_id": loan_id, "due_on": due, "renewals": loan["renewals"] + 1}


def report_lost_copy(db: Sandbox, loan_id: LoanId) -> dict[str, Any]:
    """Record that the borrowed copy is lost: the loan closes and the replacement cost is charged as a fine."""
    loan = _active_loan(db, loan_id)
    cost = db.one("SELECT i.replacement_cost_cents AS c FROM copies c JOIN items i USING (item_id) "
                  "WHERE c.copy_id = ?", (loan["copy_id"],))
    amount = cost["c"] if cost else 0
    db.execute("UPDATE loans SET status = ? WHERE loan_id = ?", ("lost", loan_id))
    db.execute("UPDATE copies SET status = ? WHERE copy_id = ?", ("lost", loan["copy_id"]))
    fine_id = db.new_id("FN")
    db.execute("INSERT INTO fines VALUES (?, ?, ?, ?, ?, ?, ?)",
               (fine_id, loan["member_id"], loan_id, "lost_item", amount, db.today, "unpaid"))
    return {"loan_id": loan_id, "status": "lost", "fine_id": fine_id, "charged_usd": usd(amount)}


def list_holds(db: Sandbox, member_id: MemberId) -> list[dict[str, Any]]:
    """The member's holds, open ones first: title, pickup branch, status and, when ready, the pickup deadline."""
    GATE.require(db, member_id)
    return db.query(
        "SELECT h.hold_id, h.item_id, i.title, h.pickup_branch, b.name AS pickup_branch_name, h.placed_on, "
        "h.status, h.ready_until FROM holds h JOIN items i USING (item_id) JOIN branches b "
        "ON b.branch_id = h.pickup_branch WHERE h.member_id = ? ORDER BY h.status NOT IN (?, ?), h.placed_on DESC",
        (member_id, *_OPEN_HOLD),
    )


def place_hold(db: Sandbox, member_id: MemberId, item_id: ItemId, pickup_branch: BranchId) -> dict[str, Any]:
    """Place a hold on a title, to be collected at the chosen branch when a copy comes in."""
    GATE.require(db, member_id)
    must_exist(db.one("SELECT * FROM items WHERE item_id = ?", (item_id,)), f"no item_id {item_id!r} in items")
    must_exist(db.one("SELECT * FROM branches WHERE branch_id = ?", (pickup_branch,)),
               f"no branch_id {pickup_branch!r} in branches")
    if db.one("SELECT hold_id FROM holds WHERE member_id = ? AND item_id = ? AND status IN (?, ?)",
              (member_id, item_id, *_OPEN_HOLD)):
        raise ToolError(f"member {member_id} already has an open hold on {item_id}")
    hold_id = db.new_id("HD")
    db.execute("INSERT INTO holds VALUES (?, ?, ?, ?, ?, ?, ?)",
               (hold_id, item_id, member_id, pickup_branch, db.today, "waiting", None))
    return {"hold_id": hold_id, "status": "waiting", "pickup_branch": pickup_branch}


def cancel_hold(db: Sandbox, hold_id: Annotated[str, Field(description="hold id, e.g. HD-600001")]) -> dict[str, Any]:
    """Cancel one of the member's open holds."""
    hold = GATE.owned(db, db.one("SELECT * FROM holds WHERE hold_id = ?", (hold_id,)),
                      f"no hold_id {hold_id!r} in holds")
    if hold["status"] not in _OPEN_HOLD:
        raise ToolError(f"hold {hold_id} is {hold['status']} and cannot be cancelled")
    db.execute("UPDATE holds SET status = ?, ready_until = NULL WHERE hold_id = ?", ("cancelled", hold_id))
    return {"hold_id": hold_id, "status": "cancelled"}


def list_interlibrary_requests(db: Sandbox, member_id: MemberId) -> list[dict[str, Any]]:
    """The member's inter-library loan requests, newest first."""
    GATE.require(db, member_id)
    return db.query("SELECT * FROM ill_requests WHERE member_id = ? ORDER BY requested_on DESC, request_id",
                    (member_id,))


def request_interlibrary_loan(
    db: Sandbox,
    member_id: MemberId,
    title: Annotated[str, Field(min_length=2, description="title of the work, as the member gave it")],
    author: Annotated[str, Field(min_length=2, description="author's name, as the member gave it")],
    pickup_branch: BranchId,
) -> dict[str, Any]:
    """Ask a partner library to lend a title; the member collects it at the chosen branch."""
    GATE.require(db, member_id)
    must_exist(db.one("SELECT * FROM branches WHERE branch_id = ?", (pickup_branch,)),
               f"no branch_id {pickup_branch!r} in branches")
    request_id = db.new_id("IL")
    db.execute("INSERT INTO ill_requests VALUES (?, ?, ?, ?, ?, ?, ?)",
               (request_id, member_id, title.strip(), author.strip(), pickup_branch, db.today, "requested"))
    return {"request_id": request_id, "status": "requested", "open_requests": _open_ill_count(db, member_id)}


def _open_ill_count(db: Sandbox, member_id: str) -> int:
    row = db.one("SELECT COUNT(*) AS n FROM ill_requests WHERE member_id = ? AND status IN (?, ?, ?)",
                 (member_id, *_OPEN_ILL))
    return row["n"] if row else 0


TOOLS = [search_catalogue, list_copies, list_loans, renew_loan, report_lost_copy, list_holds, place_hold, cancel_hold,
         list_interlibrary_requests, request_interlibrary_loan]
