"""Read-only console tools: finding and verifying the caller, and what they bought, hold and resell.

Outputs carry the facts the policy's conditions need (dates, statuses, face values and fees, transfer
counts), so an agent can decide from the console alone. Confidential values come back under an INTERNAL_
prefix: the agent sees them, the customer must not.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from envs.domains.ticketing.tool_support import GATE, CustomerId, EventId
from envs.sdk import Proof, Sandbox, SearchText, ToolError, must_exist, shown

_TICKET_VIEW = (
    "SELECT t.ticket_id, t.order_id, t.event_id, e.title, e.event_date, e.status AS event_status, "
    "v.name AS venue, sc.name AS section, st.row_label AS row, st.seat_number AS seat, st.wheelchair_space, "
    "t.status, t.face_value_cents, t.fee_cents, t.transfer_count, t.exchanged, "
    "(SELECT l.listing_id FROM resale_listings l WHERE l.ticket_id = t.ticket_id AND l.status = ?) "
    "AS active_listing_id "
    "FROM tickets t JOIN events e USING (event_id) JOIN venues v USING (venue_id) "
    "JOIN seats st USING (seat_id) JOIN sections sc ON sc.section_id = st.section_id "
)


EmailOnFile = Annotated[str | None, Field(description="email address on the account")]
PhoneOnFile = Annotated[str | None, Field(description="phone number on the account, e.g. +1-415-555-2000")]


def find_customer(db: Sandbox, email: EmailOnFile = None, phone: PhoneOnFile = None) -> dict[str, Any]:
    """Find a customer account by email or phone. Returns the customer id and name only."""
    if not email and not phone:
        raise ToolError("give an email address or a phone number")
    row = db.one("SELECT customer_id, full_name FROM customers WHERE lower(email) = lower(?) OR phone = ?",
                 (email, phone))
    return must_exist(row, "customer not found")


verify_customer = GATE.verification_tool(
    "verify_customer",
    "Verify the caller with billing ZIP code and card's last 4 digits. Required before any detail or change.",
    [Proof("billing_zip", "the 5-digit billing ZIP code on the account", column="billing_postcode"),
     Proof("card_last4", "last 4 digits of the payment card on file")],
    mismatch="verification failed: billing ZIP code or card digits do not match")


def get_customer(db: Sandbox, customer_id: CustomerId) -> dict[str, Any]:
    """The customer's profile, including INTERNAL risk values that must never be disclosed to the customer."""
    GATE.require(db, customer_id)
    row = must_exist(db.one("SELECT * FROM customers WHERE customer_id = ?", (customer_id,)), "customer not found")
    row.pop("card_last4")
    row["INTERNAL_fraud_score"] = row.pop("fraud_score")
    row["INTERNAL_bot_suspected"] = bool(row.pop("bot_suspected"))
    return row


def list_orders(db: Sandbox, customer_id: CustomerId) -> list[dict[str, Any]]:
    """Orders the customer placed, newest first, with event, ticket count, face-value and fee totals, refunds."""
    GATE.require(db, customer_id)
    orders = db.query(
        "SELECT o.order_id, o.event_id, e.title, e.event_date, e.status AS event_status, o.placed_on, o.status, "
        "t.tickets, t.face_value_total_cents, t.fees_total_cents, "
        "(SELECT SUM(r.amount_cents) FROM refunds r WHERE r.order_id = o.order_id) AS refunded_cents "
        "FROM orders o JOIN events e USING (event_id) JOIN order_totals t USING (order_id) "
        "WHERE o.customer_id = ? ORDER BY o.placed_on DESC, o.order_id",
        (customer_id,),
    )
    return shown(orders, dollars=("face_value_total", "fees_total", "refunded"))


def list_tickets(db: Sandbox, customer_id: CustomerId) -> list[dict[str, Any]]:
    """Tickets the customer currently holds (bought or received), with seat, prices and transfer history."""
    GATE.require(db, customer_id)
    tickets = db.query(_TICKET_VIEW + "WHERE t.holder_id = ? ORDER BY e.event_date, t.ticket_id",
                       ("active", customer_id))
    for ticket in tickets:
        shown(ticket, dollars=("face_value", "fee"), flags=("wheelchair_space", "exchanged"))
        ticket["accessibility_requests"] = db.query(
            "SELECT request_id, need, status FROM accessibility_requests WHERE ticket_id = ? ORDER BY request_id",
            (ticket["ticket_id"],))
    return tickets


def get_event(db: Sandbox, event_id: EventId) -> dict[str, Any]:
    """One event: date, venue, status, when a postponement or cancellation was announced, resale rules."""
    event = must_exist(db.one(
        "SELECT e.*, v.name AS venue, v.city, v.step_free FROM events e JOIN venues v USING (venue_id) "
        "WHERE e.event_id = ?", (event_id,)), f"event {event_id} not found")
    shown(event, dollars=("base_price",), flags=("resale_allowed", "step_free"))
    return event


def find_event_dates(
    db: Sandbox, title: Annotated[SearchText, Field(description="show or tour title, or a distinctive part of it")]
) -> list[dict[str, Any]]:
    """All dates of a show or tour, with venue, city and status (for exchanges between dates)."""
    pattern = "%" + title.strip().lower().replace("%", "").replace("_", "") + "%"
    return db.query(
        "SELECT e.event_id, e.title, e.event_date, e.status, v.name AS venue, v.city FROM events e "
        "JOIN venues v USING (venue_id) WHERE lower(e.title) LIKE ? ORDER BY e.event_date", (pattern,))


def list_listings(db: Sandbox, customer_id: CustomerId) -> list[dict[str, Any]]:
    """The customer's resale listings with price and status; sold ones carry the INTERNAL buyer name."""
    GATE.require(db, customer_id)
    listings = db.query(
        "SELECT l.*, e.title, e.event_date FROM resale_listings l JOIN tickets t USING (ticket_id) "
        "JOIN events e ON e.event_id = t.event_id WHERE l.seller_id = ? ORDER BY l.listing_id", (customer_id,))
    for listing in listings:
        shown(listing, dollars=("price",))
        listing["INTERNAL_buyer_name"] = listing.pop("buyer_name")
    return listings


TOOLS = [find_customer, verify_customer, get_customer, list_orders, list_tickets, get_event, find_event_dates,
         list_listings]
