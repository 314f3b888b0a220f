"""Shared pieces of ticketing templates: who the caller is, how they prove it, and how answers are phrased."""

from __future__ import annotations

from typing import Any

from envs.sdk import Fact, GenContext, ToolCall, UserScenario, call, spoken_date

UNKNOWN = ("customer id", "account number", "order number", "ticket id", "full card number", "password")

# A paid order whose tickets are all still valid, held by the buyer and not listed: refundable as a whole.
INTACT_ORDER = (
    "o.status = 'paid' AND NOT EXISTS (SELECT 1 FROM tickets t WHERE t.order_id = o.order_id "
    "AND (t.holder_id IS NOT o.customer_id OR t.status <> 'valid' OR EXISTS (SELECT 1 FROM resale_listings l "
    "WHERE l.ticket_id = t.ticket_id AND l.status = 'active')))"
)
# A valid ticket still held by its buyer, never transferred and not listed: free to transfer, list, exchange.
FREE_TICKET = (
    "t.status = 'valid' AND t.holder_id = o.customer_id AND t.transfer_count = 0 AND NOT EXISTS "
    "(SELECT 1 FROM resale_listings l WHERE l.ticket_id = t.ticket_id AND l.status = 'active')"
)


def held_ticket_row(ctx: GenContext, condition: str, params: tuple = ()) -> dict[str, Any]:
    """This variant's valid ticket held by an account holder (t) whose event (e) matches `condition`."""
    return ctx.pick("SELECT t.* FROM tickets t JOIN events e USING (event_id) WHERE t.status = 'valid' "
                    f"AND t.holder_id IS NOT NULL AND {condition} ORDER BY t.ticket_id", params)


def caller_facts(customer: dict[str, Any]) -> tuple[Fact, ...]:
    """What a real ticket buyer can tell support: email, phone, billing ZIP, the card's last four digits."""
    return (
        Fact(name="email", value=customer["email"], keywords=("email", "e mail")),
        Fact(name="phone number", value=customer["phone"], keywords=("phone", "mobile")),
        Fact(name="billing ZIP code", value=customer["billing_postcode"],
             keywords=("zip", "postcode", "postal code", "billing")),
        Fact(name="card number ending", value=customer["card_last4"],
             keywords=("card", "last 4", "last four", "digits")),
    )


def identify(customer: dict[str, Any]) -> list[ToolCall]:
    """The golden opening of every task: find the account by email, then verify the caller."""
    return [
        call("find_customer", email=customer["email"]),
        call("verify_customer", customer_id=customer["customer_id"], billing_zip=customer["billing_postcode"],
             card_last4=customer["card_last4"]),
    ]


def scenario(customer: dict[str, Any], opening: str, goal: str) -> UserScenario:
    return UserScenario(
        opening=f"{opening} My email is {customer['email']}.",
        goal=goal,
        persona=f"{customer['full_name']}, a fan who answers support's questions briefly",
        facts=caller_facts(customer),
        unknown=UNKNOWN,
    )


def customer_of(ctx: GenContext, customer_id: str) -> dict[str, Any]:
    return ctx.read("SELECT * FROM customers WHERE customer_id = ?", (customer_id,))[0]


def event_of(ctx: GenContext, event_id: str) -> dict[str, Any]:
    return ctx.read("SELECT * FROM events WHERE event_id = ?", (event_id,))[0]


def show(event: dict[str, Any]) -> str:
    """How a fan names an event: the title and its date in words."""
    return f"{event['title']} on {spoken_date(event['event_date'])}"


def seat_of(ctx: GenContext, seat_id: str) -> dict[str, Any]:
    """Section name, row and number of a seat."""
    return ctx.read("SELECT sc.name AS section, st.row_label AS row, st.seat_number AS number FROM seats st "
                    "JOIN sections sc USING (section_id) WHERE st.seat_id = ?", (seat_id,))[0]


def seat_label(ctx: GenContext, seat_id: str) -> str:
    seat = seat_of(ctx, seat_id)
    return f"{seat['section']}, row {seat['row']}, seat {seat['number']}"
