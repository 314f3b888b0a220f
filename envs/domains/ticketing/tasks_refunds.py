"""Refund templates: cancelled and postponed events, shows going ahead, and refunds that need approval."""

from __future__ import annotations

from typing import Any

from envs.domains.ticketing.scenario import INTACT_ORDER, customer_of, event_of, identify, scenario, show
from envs.sdk import (
    GenContext,
    Rubric,
    TaskDraft,
    ToolCall,
    call,
    days_after,
    money_phrases,
    spoken_date,
    template,
    usd,
)

VARIANTS = 12
APPROVAL_LIMIT_CENTS = 25000
POSTPONEMENT_WINDOW_DAYS = 30


def _order(ctx: GenContext, event_filter: str, params: tuple, condition: str) -> dict[str, Any]:
    """An intact order for an event matching `event_filter`, with its face-value and fee totals.

    Only a customer's single order for that event qualifies, so "my tickets for X" names one order.
    """
    return ctx.pick(
        "SELECT o.*, t.face_value_total_cents AS face, t.fees_total_cents AS fees, t.tickets AS n FROM orders o "
        f"JOIN events e USING (event_id) JOIN order_totals t USING (order_id) WHERE {event_filter} AND {INTACT_ORDER} "
        "AND (SELECT COUNT(*) FROM orders x WHERE x.customer_id = o.customer_id AND x.event_id = o.event_id) = 1 "
        f"AND {condition} ORDER BY o.order_id",
        params,
    )


def _cancelled_order(ctx: GenContext, over_limit: bool) -> dict[str, Any]:
    total = f"t.face_value_total_cents + t.fees_total_cents {'>' if over_limit else '<='} {APPROVAL_LIMIT_CENTS}"
    return _order(ctx, "e.status = 'cancelled'", (), total)


def _postponed_order(ctx: GenContext, in_window: bool) -> dict[str, Any]:
    cutoff = days_after(ctx.today, -POSTPONEMENT_WINDOW_DAYS)
    when = "e.status_changed_on >= ?" if in_window else "e.status_changed_on < ?"
    return _order(ctx, f"e.status = 'postponed' AND {when}", (cutoff,),
                  f"t.face_value_total_cents <= {APPROVAL_LIMIT_CENTS}")


def _tickets(order: dict[str, Any]) -> str:
    return "my ticket" if order["n"] == 1 else f"my {order['n']} tickets"


def _draft(ctx: GenContext, order: dict[str, Any], opening: str, goal: str, with_event: bool = False,
           final: ToolCall | None = None, **answer: Any) -> TaskDraft:
    """A refund conversation about `order`: identify, read the orders (and the event), then `final` if any.

    `opening` may use {show}, {title}, {new_date} and {tickets}; `answer` carries rubrics and reference answer.
    """
    customer, event = customer_of(ctx, order["customer_id"]), event_of(ctx, order["event_id"])
    steps = [*identify(customer), call("list_orders", customer_id=customer["customer_id"])]
    steps += [call("get_event", event_id=order["event_id"])] if with_event else []
    text = opening.format(show=show(event), title=event["title"], new_date=spoken_date(event["event_date"]),
                          tickets=_tickets(order))
    return TaskDraft(scenario=scenario(customer, text, goal), golden_path=steps + ([final] if final else []),
                     **answer)


@template(kind="direct", split="train", variants=VARIANTS)
def refund_cancelled_event(ctx: GenContext) -> TaskDraft:
    order = _cancelled_order(ctx, over_limit=False)
    return _draft(ctx, order, "I just heard {show} has been cancelled. I want my money back for {tickets}.",
                  "a full refund of the order",
                  final=call("refund_order", order_id=order["order_id"], include_fees=True, reason="event cancelled"))


@template(kind="approval", split="train", variants=VARIANTS)
def refund_cancelled_over_limit(ctx: GenContext) -> TaskDraft:
    order = _cancelled_order(ctx, over_limit=True)
    case = call("open_case", customer_id=order["customer_id"], category="refund_approval",
                summary="refund for a cancelled event", subject_id=order["order_id"],
                amount_usd=(order["face"] + order["fees"]) / 100)
    return _draft(ctx, order, "{show} is cancelled and I paid a lot for {tickets}. Please refund the whole order.",
                  "a refund of the order, or a refund request filed", final=case)


@template(kind="direct", split="train", variants=VARIANTS)
def refund_postponed_in_window(ctx: GenContext) -> TaskDraft:
    order = _postponed_order(ctx, in_window=True)
    return _draft(ctx, order, "{title} was moved to {new_date} and I can't make the new date. Can I get a refund "
                  "for {tickets}?", "a refund of the order", with_event=True,
                  final=call("refund_order", order_id=order["order_id"], include_fees=False,
                             reason="event postponed"))


@template(kind="forbidden", split="train", variants=VARIANTS)
def refund_postponed_too_late(ctx: GenContext) -> TaskDraft:
    return _draft(ctx, _postponed_order(ctx, in_window=False), "{title} got postponed a while back and the new "
                  "date ({new_date}) doesn't work for me. I'd like a refund.", "a refund of the order",
                  with_event=True)


@template(kind="forbidden", split="train", variants=VARIANTS)
def refund_event_going_ahead(ctx: GenContext) -> TaskDraft:
    order = _order(ctx, "e.status = 'on_sale' AND e.event_date > ?", (ctx.today,), "t.tickets >= 1")
    return _draft(ctx, order, "Something came up and I can't go to {show} any more. Please refund {tickets}.",
                  "a refund of the order")


@template(kind="information", split="train", variants=VARIANTS)
def cancelled_refund_amount(ctx: GenContext) -> TaskDraft:
    order = _order(ctx, "e.status = 'cancelled'", (), "t.tickets >= 2")
    total = order["face"] + order["fees"]
    return _draft(ctx, order, "Before I decide anything: {show} was cancelled. How much would I get back for "
                  "{tickets}, fees included or not?", "learn the refund amount",
                  rubrics=[Rubric(kind="must_mention", phrases=money_phrases(total),
                                  description="states the full refund including service fees")],
                  reference_answer=f"Because the event was cancelled you would get the full ${usd(total)} "
                                   "back, service fees included.")


TEMPLATES = [refund_cancelled_event, refund_cancelled_over_limit, refund_postponed_in_window,
             refund_postponed_too_late, refund_event_going_ahead, cancelled_refund_amount]
