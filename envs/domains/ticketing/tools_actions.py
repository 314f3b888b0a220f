"""Console tools that change state: refunds, transfers, resale, exchanges, accessibility and cases.

Each refuses only what is physically impossible (unknown record, caller not verified or not the holder, a
ticket already refunded or locked in a listing, no free seat). Windows, caps and approvals are policy, left
to the agent. Every call is one transaction, so a refusal leaves nothing half-written.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from envs.domains.ticketing.tool_support import (
    GATE,
    OrderId,
    TicketId,
    active_listing,
    held_ticket,
    unlisted_ticket,
)
from envs.sdk import Escalations, Sandbox, ToolError, must_exist, to_cents, usd

CASES = Escalations(GATE, "cases", "case_id", "CS",
                    categories=("refund_approval", "urgent_access", "billing", "delivery", "venue_info"),
                    needs_decision=("refund_approval", "urgent_access"), text_column="summary")
Reason = Annotated[str, Field(description="short reason, as the customer would read it")]
RecipientEmail = Annotated[str, Field(description="email address of the person receiving the ticket")]
NewEventId = Annotated[str, Field(description="event id of the date to move to (from find_event_dates)")]


def refund_order(
    db: Sandbox,
    order_id: OrderId,
    include_fees: Annotated[bool, Field(description="also refund the service fees, not just face value")],
    reason: Reason,
) -> dict[str, Any]:
    """Refund every ticket of an order to the original card; the tickets become void."""
    order = GATE.owned(db, db.one("SELECT * FROM orders WHERE order_id = ?", (order_id,)),
                       f"order {order_id} not found")
    if order["status"] != "paid":
        raise ToolError(f"order {order_id} is already {order['status']}")
    tickets = db.query("SELECT * FROM tickets WHERE order_id = ? ORDER BY ticket_id", (order_id,))
    for ticket in tickets:
        if ticket["holder_id"] != order["customer_id"] or active_listing(db, ticket["ticket_id"]):
            raise ToolError(f"ticket {ticket['ticket_id']} has been passed on or is listed; it cannot be refunded")
    totals = db.one("SELECT * FROM order_totals WHERE order_id = ?", (order_id,))  # None: an order without tickets
    cents = 0
    if totals is not None:
        cents = totals["face_value_total_cents"] + (totals["fees_total_cents"] if include_fees else 0)
    db.execute("UPDATE tickets SET status = ? WHERE order_id = ?", ("refunded", order_id))
    db.execute("UPDATE orders SET status = ? WHERE order_id = ?", ("refunded", order_id))
    refund_id = db.new_id("RF")
    db.execute("INSERT INTO refunds VALUES (?, ?, ?, ?, ?, ?)",
               (refund_id, order_id, cents, int(include_fees), reason, db.today))
    return {"refund_id": refund_id, "order_id": order_id, "amount_usd": usd(cents), "fees_included": include_fees}


def transfer_ticket(db: Sandbox, ticket_id: TicketId, recipient_email: RecipientEmail) -> dict[str, Any]:
    """Send a ticket to someone else by email; it leaves the caller's account at once."""
    ticket = unlisted_ticket(db, ticket_id)
    email = recipient_email.strip().lower()
    if email == ticket["holder_email"].lower():
        raise ToolError("the recipient already holds this ticket")
    recipient = db.one("SELECT customer_id FROM customers WHERE lower(email) = ?", (email,))
    db.execute("UPDATE tickets SET holder_id = ?, holder_email = ?, transfer_count = transfer_count + 1 "
               "WHERE ticket_id = ?", (recipient["customer_id"] if recipient else None, email, ticket_id))
    transfer_id = db.new_id("TR")
    db.execute("INSERT INTO transfers VALUES (?, ?, ?, ?, ?)",
               (transfer_id, ticket_id, ticket["holder_id"], email, db.today))
    return {"transfer_id": transfer_id, "ticket_id": ticket_id, "sent_to": email}


def list_ticket_for_resale(
    db: Sandbox,
    ticket_id: TicketId,
    price_usd: Annotated[float, Field(gt=0, description="asking price in US dollars, e.g. 95.00")],
) -> dict[str, Any]:
    """Put a ticket on the resale marketplace at the given asking price."""
    seller = unlisted_ticket(db, ticket_id)
    listing_id = db.new_id("RL")
    db.execute("INSERT INTO resale_listings VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               (listing_id, ticket_id, seller["holder_id"], to_cents(price_usd), "active", db.today, None, None))
    return {"listing_id": listing_id, "ticket_id": ticket_id, "price_usd": usd(to_cents(price_usd))}


def withdraw_listing(
    db: Sandbox, listing_id: Annotated[str, Field(description="listing id, e.g. RL-30001 (from list_listings)")]
) -> dict[str, Any]:
    """Take an unsold resale listing off the marketplace."""
    listing = must_exist(db.one("SELECT * FROM resale_listings WHERE listing_id = ?", (listing_id,)),
                         f"listing {listing_id} not found")
    GATE.require(db, listing["seller_id"])
    if listing["status"] != "active":
        raise ToolError(f"listing {listing_id} is {listing['status']}")
    db.execute("UPDATE resale_listings SET status = ? WHERE listing_id = ?", ("withdrawn", listing_id))
    return {"listing_id": listing_id, "status": "withdrawn"}


def exchange_ticket(db: Sandbox, ticket_id: TicketId, new_event_id: NewEventId) -> dict[str, Any]:
    """Move a ticket to another event in the same-named section; the system assigns the first free seat."""
    ticket = unlisted_ticket(db, ticket_id)
    event = must_exist(db.one("SELECT * FROM events WHERE event_id = ?", (new_event_id,)),
                       f"event {new_event_id} not found")
    if event["event_id"] == ticket["event_id"]:
        raise ToolError("the ticket is already for that event")
    seat = db.one(
        "SELECT st.seat_id, sc.name AS section, st.row_label, st.seat_number FROM seats st "
        "JOIN sections sc USING (section_id) "
        "WHERE sc.venue_id = ? AND st.wheelchair_space = 0 AND sc.name = (SELECT s2.name FROM seats x "
        "JOIN sections s2 USING (section_id) WHERE x.seat_id = ?) AND st.seat_id NOT IN "
        "(SELECT t.seat_id FROM tickets t WHERE t.event_id = ? AND t.status = ?) "
        "ORDER BY st.row_label, st.seat_number LIMIT 1",
        (event["venue_id"], ticket["seat_id"], new_event_id, "valid"))
    if seat is None:
        raise ToolError(f"no free seat in the same section for event {new_event_id}")
    db.execute("UPDATE tickets SET event_id = ?, seat_id = ?, exchanged = 1 WHERE ticket_id = ?",
               (new_event_id, seat["seat_id"], ticket_id))
    return {"ticket_id": ticket_id, "event_id": new_event_id, "section": seat["section"],
            "row": seat["row_label"], "seat": seat["seat_number"]}


def request_accessibility(
    db: Sandbox,
    ticket_id: TicketId,
    need: Literal["wheelchair_space", "companion_seat", "hearing_loop", "step_free_route"],
    note: Annotated[str | None, Field(description="anything the venue team should know")] = None,
) -> dict[str, Any]:
    """File an accessibility request for a ticket with the venue team."""
    held_ticket(db, ticket_id)
    if db.one("SELECT 1 AS x FROM accessibility_requests WHERE ticket_id = ? AND need = ?", (ticket_id, need)):
        raise ToolError(f"a {need} request is already on file for ticket {ticket_id}")
    request_id = db.new_id("AR")
    db.execute("INSERT INTO accessibility_requests VALUES (?, ?, ?, ?, ?, ?)",
               (request_id, ticket_id, need, "requested", note, db.today))
    return {"request_id": request_id, "ticket_id": ticket_id, "need": need, "status": "requested"}


open_case = CASES.tool(
    "open_case",
    "Open a support case. Approval categories start as pending_approval for a supervisor or venue team.",
    text="what the customer asked for and why", subject="the order or ticket concerned")


TOOLS = [refund_order, transfer_ticket, list_ticket_for_resale, withdraw_listing, exchange_ticket,
         request_accessibility, open_case]
