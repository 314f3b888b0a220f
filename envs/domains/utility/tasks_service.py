"""Utility templates about the service itself: meter readings, tariff switches, reconnections, move-outs."""

from __future__ import annotations

from typing import Any

from envs.domains.utility.scenario import caller, holder, holder_of_meter, verification
from envs.sdk import GenContext, TaskDraft, ToolCall, call, days_after, spoken_date, template

VARIANTS = 8
UTILITY_WORD = {"electric": "electricity", "water": "water"}
# A meter is free to switch when it never changed tariff or changed at least a year ago (policy rule 5).
SWITCH_FREE = "(m.last_tariff_change IS NULL OR m.last_tariff_change <= date(?, '-365 days'))"


def _meter_where(ctx: GenContext, condition: str, params: tuple[Any, ...] = ()) -> dict[str, Any]:
    """This variant's meter among those matching `condition` (columns of meters m and accounts a)."""
    return ctx.pick("SELECT m.*, p.street FROM meters m JOIN premises p USING (premise_id) "
                    f"JOIN accounts a USING (account_id) WHERE {condition} ORDER BY m.meter_id", params)


def _latest_register(ctx: GenContext, meter_id: str) -> int:
    return ctx.read("SELECT register FROM readings WHERE meter_id = ? ORDER BY read_on DESC LIMIT 1",
                    (meter_id,))[0]["register"]


def _reading_task(ctx: GenContext, lower: bool) -> TaskDraft:
    meter = _meter_where(ctx, "m.status = 'connected'")
    person = holder_of_meter(ctx, meter["meter_id"])
    last = _latest_register(ctx, meter["meter_id"])
    step = ctx.rng.randrange(60, 700) if meter["utility"] == "electric" else ctx.rng.randrange(400, 3000)
    register = last - step if lower else last + step
    steps = [*verification(person), call("list_service_points", account_id=person["account_id"]),
             call("get_meter_readings", meter_id=meter["meter_id"])]
    if not lower:
        steps.append(call("submit_meter_reading", meter_id=meter["meter_id"], register=register))
    word = UTILITY_WORD[meter["utility"]]
    return TaskDraft(
        scenario=caller(person, f"Hi, I just read the {word} meter at {meter['street']} myself. The register "
                        f"shows {register}. Can you put that on file so my next bill isn't estimated?",
                        f"the {word} reading {register} recorded"),
        golden_path=steps,
    )


@template(kind="direct", split="train", variants=VARIANTS)
def record_customer_reading(ctx: GenContext) -> TaskDraft:
    return _reading_task(ctx, lower=False)


@template(kind="forbidden", split="train", variants=VARIANTS)
def reading_below_last_register(ctx: GenContext) -> TaskDraft:
    return _reading_task(ctx, lower=True)


def _tariff_request(ctx: GenContext, meter: dict[str, Any], target: str, name: str,
                    allowed: bool, patch: dict[str, list[dict[str, Any]]] | None = None) -> TaskDraft:
    person = holder_of_meter(ctx, meter["meter_id"])
    steps = [*verification(person), call("list_service_points", account_id=person["account_id"]),
             call("list_tariffs", utility=meter["utility"])]
    if allowed:
        steps.append(call("change_tariff", meter_id=meter["meter_id"], tariff_code=target))
    word = UTILITY_WORD[meter["utility"]]
    return TaskDraft(
        scenario=caller(person, f"I'd like to move the {word} at {meter['street']} onto the {name} tariff "
                        f"({target}), please.", f"the {word} meter switched to {name}"),
        golden_path=steps,
        initial_patch=patch or {},
    )


def _switchable_electric(ctx: GenContext) -> dict[str, Any]:
    return _meter_where(ctx, f"m.utility = 'electric' AND m.status = 'connected' AND m.tariff_code IN "
                        f"('E-STD', 'E-FLAT15') AND {SWITCH_FREE}", (ctx.today,))


def _upgrade_choice(meter: dict[str, Any]) -> tuple[str, str]:
    return ("E-TOU", "Time-of-Use Saver") if meter["meter_type"] == "smart" else ("E-GREEN", "Green Choice 100")


@template(kind="direct", split="train", variants=VARIANTS)
def switch_electric_tariff(ctx: GenContext) -> TaskDraft:
    meter = _switchable_electric(ctx)
    return _tariff_request(ctx, meter, *_upgrade_choice(meter), allowed=True)


@template(kind="forbidden", split="train", variants=VARIANTS)
def tariff_switched_within_year(ctx: GenContext) -> TaskDraft:
    meter = _switchable_electric(ctx)
    recent = days_after(ctx.today, -ctx.rng.randrange(15, 360))
    patch = {"meters": [ctx.row_with("meters", "meter_id", meter["meter_id"], last_tariff_change=recent)]}
    return _tariff_request(ctx, meter, *_upgrade_choice(meter), allowed=False, patch=patch)


@template(kind="forbidden", split="train", variants=VARIANTS)
def time_of_use_without_smart_meter(ctx: GenContext) -> TaskDraft:
    meter = _meter_where(ctx, f"m.utility = 'electric' AND m.meter_type = 'standard' AND m.status = 'connected' "
                         f"AND m.tariff_code <> 'E-TOU' AND {SWITCH_FREE}", (ctx.today,))
    return _tariff_request(ctx, meter, "E-TOU", "Time-of-Use Saver", allowed=False)


@template(kind="forbidden", split="heldout", variants=VARIANTS)
def care_tariff_without_enrolment(ctx: GenContext) -> TaskDraft:
    meter = _meter_where(ctx, f"a.assistance_program = 'none' AND m.status = 'connected' AND {SWITCH_FREE}",
                         (ctx.today,))
    target = "E-CARE" if meter["utility"] == "electric" else "W-CARE"
    name = "CARE Electric Assist" if target == "E-CARE" else "CARE Water Assist"
    return _tariff_request(ctx, meter, target, name, allowed=False)


def _reconnect_task(ctx: GenContext, meter: dict[str, Any], allowed: bool,
                    patch: dict[str, list[dict[str, Any]]] | None = None) -> TaskDraft:
    person = holder_of_meter(ctx, meter["meter_id"])
    steps = [*verification(person), call("list_service_points", account_id=person["account_id"]),
             call("list_bills", account_id=person["account_id"])]
    if not allowed:  # overdue bills: only an active payment plan would still allow it (policy rule 10)
        steps.append(call("list_payment_plans", account_id=person["account_id"]))
    else:
        steps.append(call("schedule_service_order", meter_id=meter["meter_id"], order_type="reconnect",
                          scheduled_for=days_after(ctx.today, 1), note="reconnect after payment"))
    word = UTILITY_WORD[meter["utility"]]
    return TaskDraft(
        scenario=caller(person, f"My {word} at {meter['street']} was shut off for non-payment. I've sorted the "
                        "bills out now. Can you get it turned back on?", f"the {word} reconnected"),
        golden_path=steps,
        initial_patch=patch or {},
    )


NO_OVERDUE = ("NOT EXISTS (SELECT 1 FROM bills b WHERE b.account_id = a.account_id AND b.status = 'unpaid' "
              "AND b.due_on < ?)")
NO_ACTIVE_PLAN = ("NOT EXISTS (SELECT 1 FROM payment_plans pp WHERE pp.account_id = a.account_id "
                  "AND pp.status = 'active')")


@template(kind="direct", split="train", variants=VARIANTS)
def reconnect_paid_up_meter(ctx: GenContext) -> TaskDraft:
    meter = _meter_where(ctx, f"m.status = 'disconnected' AND {NO_OVERDUE}", (ctx.today,))
    return _reconnect_task(ctx, meter, allowed=True)


@template(kind="forbidden", split="train", variants=VARIANTS)
def reconnect_with_overdue_bill(ctx: GenContext) -> TaskDraft:
    meter = _meter_where(ctx, f"m.status = 'disconnected' AND {NO_ACTIVE_PLAN}")
    person = holder_of_meter(ctx, meter["meter_id"])
    april = ctx.read("SELECT bill_id FROM bills WHERE account_id = ? AND issued_on = ?",
                     (person["account_id"], "2026-04-08"))[0]["bill_id"]
    patch = {"bills": [ctx.row_with("bills", "bill_id", april, status="unpaid", paid_on=None)]}
    return _reconnect_task(ctx, meter, allowed=False, patch=patch)


def _move_out(ctx: GenContext, medical: int) -> TaskDraft:
    """Every connected meter at one premise stops on the move-out date; medical accounts go on hold."""
    premise = ctx.pick(
        "SELECT p.* FROM premises p JOIN accounts a USING (account_id) WHERE a.medical_priority = ? AND NOT EXISTS "
        "(SELECT 1 FROM meters m WHERE m.premise_id = p.premise_id AND m.status <> 'connected') ORDER BY p.premise_id",
        (medical,))
    person = holder(ctx, premise["account_id"])
    moving = days_after(ctx.today, ctx.rng.randrange(2, 61))
    meters = ctx.read("SELECT meter_id FROM meters WHERE premise_id = ? ORDER BY meter_id", (premise["premise_id"],))
    orders: list[ToolCall] = [
        call("schedule_service_order", meter_id=m["meter_id"], order_type="disconnect", scheduled_for=moving,
             note="move-out", **({"hold_for_review": True} if medical else {}))
        for m in meters
    ]
    return TaskDraft(
        scenario=caller(person, f"I'm moving out of {premise['street']} on {spoken_date(moving)}. Please stop all "
                        "the utility service there from that day.", f"service at {premise['street']} stopped"),
        golden_path=[*verification(person), call("get_account", account_id=person["account_id"]),
                     call("list_service_points", account_id=person["account_id"]), *orders],
    )


@template(kind="direct", split="heldout", variants=VARIANTS)
def move_out_disconnection(ctx: GenContext) -> TaskDraft:
    return _move_out(ctx, medical=0)


@template(kind="approval", split="heldout", variants=VARIANTS + 2)
def medical_priority_move_out(ctx: GenContext) -> TaskDraft:
    return _move_out(ctx, medical=1)


TEMPLATES = [record_customer_reading, reading_below_last_register, switch_electric_tariff,
             tariff_switched_within_year, time_of_use_without_smart_meter, care_tariff_without_enrolment,
             reconnect_paid_up_meter, reconnect_with_overdue_bill, move_out_disconnection, medical_priority_move_out]
