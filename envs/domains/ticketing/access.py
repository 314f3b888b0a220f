"""What every ticketing tool checks first: the record exists and belongs to the verified caller.

These are the only rules the console enforces itself (identity and existence); everything the policy decides
is left to the agent so the final state shows whether it followed the policy.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from envs.sdk import Sandbox, ToolError

CustomerId = Annotated[str, Field(description="customer id, e.g. CU-40001 (from find_customer)")]
TicketId = Annotated[str, Field(description="ticket id, e.g. TK-800001 (from list_tickets)")]
OrderId = Annotated[str, Field(description="order id, e.g. OR-600001 (from list_orders)")]
EventId = Annotated[str, Field(description="event id, e.g. E-3001")]

VERIFIED = "verified"


def usd(cents: int | None) -> str | None:
    """Cents as a dollar string, the only money format tools return."""
    return None if cents is None else f"{cents / 100:.2f}"


def to_cents(dollars: float) -> int:
    return round(dollars * 100)


def require(row: dict[str, Any] | None, what: str) -> dict[str, Any]:
    if row is None:
        raise ToolError(f"{what} not found")
    return row


def ensure_verified(db: Sandbox, customer_id: str) -> None:
    if customer_id not in db.memory.get(VERIFIED, set()):
        raise ToolError(f"customer {customer_id} is not verified in this conversation; call verify_customer first")


def mark_verified(db: Sandbox, customer_id: str) -> None:
    db.memory.setdefault(VERIFIED, set()).add(customer_id)


def held_ticket(db: Sandbox, ticket_id: str) -> dict[str, Any]:
    """A valid ticket whose current holder is a verified caller (the ordering customer may have passed it on)."""
    ticket = require(db.one("SELECT * FROM tickets WHERE ticket_id = ?", (ticket_id,)), f"ticket {ticket_id}")
    if ticket["holder_id"] is None or ticket["holder_id"] not in db.memory.get(VERIFIED, set()):
        raise ToolError(f"ticket {ticket_id} is not held by a verified customer in this conversation")
    if ticket["status"] != "valid":
        raise ToolError(f"ticket {ticket_id} is {ticket['status']}")
    return ticket


def active_listing(db: Sandbox, ticket_id: str) -> dict[str, Any] | None:
    return db.one("SELECT * FROM resale_listings WHERE ticket_id = ? AND status = ?", (ticket_id, "active"))


def unlisted_ticket(db: Sandbox, ticket_id: str) -> dict[str, Any]:
    """A held ticket that is not on the resale marketplace: a listed ticket is locked until withdrawn."""
    ticket = held_ticket(db, ticket_id)
    if active_listing(db, ticket_id):
        raise ToolError(f"ticket {ticket_id} is listed for resale; withdraw the listing first")
    return ticket


def owned_order(db: Sandbox, order_id: str) -> dict[str, Any]:
    order = require(db.one("SELECT * FROM orders WHERE order_id = ?", (order_id,)), f"order {order_id}")
    ensure_verified(db, order["customer_id"])
    return order
