"""Templates on tickets a fan holds: transfers, resale listings, exchanges between dates, accessibility."""

from __future__ import annotations

from collections.abc import Callable
from math import ceil, floor
from typing import Any

from envs.domains.ticketing.catalog import RESALE_CAP_PERCENT
from envs.domains.ticketing.scenario import (
    FREE_TICKET,
    customer_of,
    event_of,
    held_ticket_row,
    identify,
    scenario,
    seat_label,
    show,
)
from envs.sdk import GenContext, TaskDraft, ToolCall, call, days_after, spoken_date, template

VARIANTS = 12
FRIENDS = ["jamie.ortiz", "sam.lindgren", "priya.menon", "alex.duarte", "noor.haddad", "chris.oyelowo",
           "mina.park", "theo.brandt"]
MAIL_HOSTS = ["gmail.com", "outlook.com", "icloud.com", "proton.me"]
ACCESS_OPENINGS = {
    "wheelchair_space": "I use a wheelchair and need a wheelchair space instead of a regular seat",
    "companion_seat": "I need a companion seat next to me because I attend with my carer",
    "hearing_loop": "I'm hard of hearing and would like the hearing loop set up",
    "step_free_route": "I can't manage stairs, so I need a step-free route to my seat",
}


def _ticket(ctx: GenContext, condition: str, params: tuple = ()) -> dict[str, Any]:
    """A ticket still held by its buyer (see FREE_TICKET) whose event matches `condition`."""
    return ctx.pick(
        "SELECT t.*, o.customer_id FROM tickets t JOIN orders o USING (order_id) "
        f"JOIN events e ON e.event_id = t.event_id WHERE {FREE_TICKET} AND {condition} ORDER BY t.ticket_id",
        params,
    )


def _parties(ctx: GenContext, ticket: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The holder, the event and how the fan describes the ticket (show, date and seat)."""
    holder = customer_of(ctx, ticket["holder_id"])
    event = event_of(ctx, ticket["event_id"])
    return holder, event, f"my ticket for {show(event)} ({seat_label(ctx, ticket['seat_id'])})"


def _holder_reads(customer: dict[str, Any]) -> list[ToolCall]:
    return [*identify(customer), call("list_tickets", customer_id=customer["customer_id"])]


def _friend(ctx: GenContext) -> str:
    return f"{ctx.rng.choice(FRIENDS)}{ctx.rng.randrange(10, 99)}@{ctx.rng.choice(MAIL_HOSTS)}"


@template(kind="direct", split="train", variants=VARIANTS)
def transfer_to_friend(ctx: GenContext) -> TaskDraft:
    ticket = _ticket(ctx, "e.status = 'on_sale' AND e.event_date >= ?", (days_after(ctx.today, 2),))
    holder, _, described = _parties(ctx, ticket)
    friend = _friend(ctx)
    return TaskDraft(
        scenario=scenario(holder, f"Please send {described} to my friend at {friend}.", "the ticket sent on"),
        golden_path=[*_holder_reads(holder), call("transfer_ticket", ticket_id=ticket["ticket_id"],
                                                  recipient_email=friend)],
    )


@template(kind="forbidden", split="train", variants=VARIANTS)
def transfer_too_close(ctx: GenContext) -> TaskDraft:
    ticket = _ticket(ctx, "e.status = 'on_sale' AND e.event_date BETWEEN ? AND ?",
                     (ctx.today, days_after(ctx.today, 1)))
    holder, _, described = _parties(ctx, ticket)
    return TaskDraft(
        scenario=scenario(holder, f"I can't go after all. Could you move {described} over to {_friend(ctx)}?",
                          "the ticket sent on"),
        golden_path=_holder_reads(holder),
    )


@template(kind="forbidden", split="heldout", variants=VARIANTS)
def pass_on_received_ticket(ctx: GenContext) -> TaskDraft:
    ticket = held_ticket_row(ctx, "t.transfer_count > 0 AND e.status = 'on_sale' AND e.event_date >= ? AND NOT "
                             "EXISTS (SELECT 1 FROM resale_listings l WHERE l.ticket_id = t.ticket_id "
                             "AND l.status = 'active')", (days_after(ctx.today, 2),))
    holder, _, described = _parties(ctx, ticket)
    return TaskDraft(
        scenario=scenario(holder, f"A friend sent me a {described.removeprefix('my ')}, but I can't use it. "
                          f"Please pass it on to {_friend(ctx)}.", "the ticket sent on"),
        golden_path=_holder_reads(holder),
    )


def _resale_offer(ctx: GenContext, factors: list[float], rounding: Callable[[float], int]
                  ) -> tuple[dict[str, Any], dict[str, Any], str, int]:
    """A resellable ticket, its holder, how they describe it, and an asking price in whole dollars: the resale
    cap times one of `factors`, rounded (`floor` or `ceil`) so it stays on the intended side of the cap."""
    ticket = _ticket(ctx, "e.status = 'on_sale' AND e.resale_allowed = 1 AND e.event_date >= ?",
                     (days_after(ctx.today, 3),))
    holder, _, described = _parties(ctx, ticket)
    price = rounding(ticket["face_value_cents"] * RESALE_CAP_PERCENT * ctx.rng.choice(factors) / 10000)
    return ticket, holder, described, price


@template(kind="direct", split="train", variants=VARIANTS)
def list_within_cap(ctx: GenContext) -> TaskDraft:
    ticket, holder, described, price = _resale_offer(ctx, [0.7, 0.85, 0.95, 1.0], floor)
    return TaskDraft(
        scenario=scenario(holder, f"I'd like to resell {described} for ${price}.", f"the ticket listed at ${price}"),
        golden_path=[*_holder_reads(holder), call("get_event", event_id=ticket["event_id"]),
                     call("list_ticket_for_resale", ticket_id=ticket["ticket_id"], price_usd=float(price))],
    )


@template(kind="forbidden", split="train", variants=VARIANTS)
def list_above_cap(ctx: GenContext) -> TaskDraft:
    _, holder, described, price = _resale_offer(ctx, [1.1, 1.25, 1.5, 1.7], ceil)
    return TaskDraft(
        scenario=scenario(holder, f"Demand is huge, so please list {described} on resale for ${price}.",
                          f"the ticket listed at ${price}"),
        golden_path=_holder_reads(holder),
    )


@template(kind="direct", split="heldout", variants=VARIANTS)
def exchange_for_other_date(ctx: GenContext) -> TaskDraft:
    ticket = _ticket(ctx, "t.exchanged = 0 AND e.status = 'on_sale' AND e.event_date >= ? AND EXISTS (SELECT 1 "
                     "FROM events x WHERE x.title = e.title AND x.event_id <> e.event_id AND x.status = 'on_sale' "
                     "AND x.event_date > ?)", (days_after(ctx.today, 7), ctx.today))
    holder, event, described = _parties(ctx, ticket)
    target = ctx.rng.choice(ctx.read(
        "SELECT e.*, v.city FROM events e JOIN venues v USING (venue_id) WHERE e.title = ? AND e.event_id <> ? "
        "AND e.status = 'on_sale' AND e.event_date > ? ORDER BY e.event_id",
        (event["title"], event["event_id"], ctx.today)))
    return TaskDraft(
        scenario=scenario(holder, f"Could I swap {described} for the {target['city']} show on "
                          f"{spoken_date(target['event_date'])} instead?",
                          f"the ticket moved to the {target['city']} date"),
        golden_path=[*_holder_reads(holder), call("find_event_dates", title=event["title"]),
                     call("exchange_ticket", ticket_id=ticket["ticket_id"], new_event_id=target["event_id"])],
    )


def _access_task(ctx: GenContext, first_day: int, last_day: int, urgent: bool) -> TaskDraft:
    ticket = _ticket(ctx, "e.status = 'on_sale' AND e.event_date BETWEEN ? AND ?",
                     (days_after(ctx.today, first_day), days_after(ctx.today, last_day)))
    holder, _, described = _parties(ctx, ticket)
    filed = {r["need"] for r in ctx.read("SELECT need FROM accessibility_requests WHERE ticket_id = ?",
                                          (ticket["ticket_id"],))}
    need = ctx.rng.choice(sorted(set(ACCESS_OPENINGS) - filed))
    if urgent:
        final = call("open_case", customer_id=holder["customer_id"], category="urgent_access",
                     summary=f"{need} requested", subject_id=ticket["ticket_id"])
    else:
        final = call("request_accessibility", ticket_id=ticket["ticket_id"], need=need)
    return TaskDraft(
        scenario=scenario(holder, f"{ACCESS_OPENINGS[need]} for {described}.", f"the {need.replace('_', ' ')} "
                          "arranged or requested"),
        golden_path=[*_holder_reads(holder), final],
    )


@template(kind="direct", split="train", variants=VARIANTS)
def accessibility_request(ctx: GenContext) -> TaskDraft:
    return _access_task(ctx, 3, 365, urgent=False)


@template(kind="approval", split="heldout", variants=VARIANTS)
def urgent_accessibility_request(ctx: GenContext) -> TaskDraft:
    return _access_task(ctx, 0, 2, urgent=True)


TEMPLATES = [transfer_to_friend, transfer_too_close, pass_on_received_ticket, list_within_cap, list_above_cap,
             exchange_for_other_date, accessibility_request, urgent_accessibility_request]
