"""What every ticketing tool shares: parameter types, the verified-customer gate and the held-ticket checks.

These are the only rules the console enforces itself (identity and existence); everything the policy decides
is left to the agent so the final state shows whether it followed the policy.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from envs.sdk import CallerGate, Sandbox, ToolError, must_exist

CustomerId = Annotated[str, Field(description="customer id, e.g. CU-40001 (from find_customer)")]
TicketId = Annotated[str, Field(description="ticket id, e.g. TK-800001 (from list_tickets)")]
OrderId = Annotated[str, Field(description="order id, e.g. OR-600001 (from list_orders)")]
EventId = Annotated[str, Field(description="event id, e.g. E-3001")]

GATE = CallerGate("customers", "customer_id", CustomerId,
                  "customer {} is not verified in this conversation; call verify_customer first")


def held_ticket(db: Sandbox, ticket_id: str) -> dict[str, Any]:
    """A valid ticket whose current holder is a verified caller (the ordering customer may have passed it on)."""
    ticket = must_exist(db.one("SELECT * FROM tickets WHERE ticket_id = ?", (ticket_id,)),
                        f"ticket {ticket_id} not found")
    if not GATE.admitted(db, ticket["holder_id"]):
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
