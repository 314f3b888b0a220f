"""Telecom templates that ask for a change: allowed, forbidden by policy, or needing approval."""

from __future__ import annotations

from envs.domains.telecom.scenario import ACTIVE_PLANS_BY_FEE, PLAN_NAMES, customer_of, identify, lines_of, scenario
from envs.sdk import GenContext, TaskDraft, call, days_after, template

VARIANTS = 12
NO_OVERDUE = ("NOT EXISTS (SELECT 1 FROM invoices i WHERE i.customer_id = l.customer_id "
              "AND i.status = 'unpaid' AND i.due_on < ?)")


def _plan_line(ctx: GenContext, codes: tuple[str, ...], under_contract: bool) -> dict:
    """An active line on one of `codes` whose last plan change is 30+ days old (optionally under contract)."""
    contract = " AND l.contract_end > ?" if under_contract else ""
    return ctx.pick(
        f"SELECT l.* FROM lines l WHERE l.status = 'active' AND l.plan_code IN ({', '.join('?' * len(codes))}) "
        f"AND (l.last_plan_change IS NULL OR l.last_plan_change <= ?){contract} ORDER BY l.line_id",
        (*codes, days_after(ctx.today, -30), *((ctx.today,) if under_contract else ())),
    )


def _upgrade_target(plan_code: str) -> str:
    fees = ACTIVE_PLANS_BY_FEE
    return "PLUS20" if plan_code == "LEGACY10" else fees[fees.index(plan_code) + 1]


@template(kind="direct", split="train", variants=VARIANTS)
def upgrade_plan(ctx: GenContext) -> TaskDraft:
    line = _plan_line(ctx, ("BASIC5", "LEGACY10", "PLUS20", "MAX50"), under_contract=False)
    customer, target = customer_of(ctx, line["customer_id"]), _upgrade_target(line["plan_code"])
    return TaskDraft(
        scenario=scenario(customer, f"Hi, I'd like to upgrade my line {line['msisdn']} to the "
                          f"{PLAN_NAMES[target]} plan.", f"line {line['msisdn']} moves to {PLAN_NAMES[target]}",
                          phone=line["msisdn"]),
        golden_path=[*identify(customer, line["msisdn"]), lines_of(customer),
                     call("change_plan", line_id=line["line_id"], plan_code=target)],
    )


@template(kind="forbidden", split="train", variants=VARIANTS)
def downgrade_under_contract(ctx: GenContext) -> TaskDraft:
    line = _plan_line(ctx, ("PLUS20", "MAX50", "UNLTD"), under_contract=True)
    customer = customer_of(ctx, line["customer_id"])
    target = ACTIVE_PLANS_BY_FEE[ACTIVE_PLANS_BY_FEE.index(line["plan_code"]) - 1]
    return TaskDraft(
        scenario=scenario(customer, f"My bill is too high. Please move my line {line['msisdn']} down to the "
                          f"{PLAN_NAMES[target]} plan.", f"cheaper plan {PLAN_NAMES[target]}", phone=line["msisdn"]),
        golden_path=[*identify(customer, line["msisdn"]), lines_of(customer)],
        violation=call("change_plan", line_id=line["line_id"], plan_code=target),
    )


@template(kind="forbidden", split="train", variants=VARIANTS)
def plan_change_too_soon(ctx: GenContext) -> TaskDraft:
    line = _plan_line(ctx, ("BASIC5", "PLUS20", "MAX50"), under_contract=False)
    customer, target = customer_of(ctx, line["customer_id"]), _upgrade_target(line["plan_code"])
    recent = days_after(ctx.today, -ctx.rng.randrange(1, 30))
    return TaskDraft(
        scenario=scenario(customer, f"Can you switch my line {line['msisdn']} to {PLAN_NAMES[target]}? "
                          "I know I changed recently but I need more data.", f"plan {PLAN_NAMES[target]}",
                          phone=line["msisdn"]),
        initial_patch={"lines": [ctx.row_with("lines", "line_id", line["line_id"], last_plan_change=recent)]},
        golden_path=[*identify(customer, line["msisdn"]), lines_of(customer)],
        violation=call("change_plan", line_id=line["line_id"], plan_code=target),
    )


def _roaming_line(ctx: GenContext, tiers: tuple[str, ...]) -> dict:
    return ctx.pick(
        "SELECT l.* FROM lines l JOIN customers c USING (customer_id) WHERE l.status = 'active' "
        f"AND l.roaming_enabled = 0 AND c.tier IN ({', '.join('?' * len(tiers))}) AND {NO_OVERDUE} "
        "ORDER BY l.line_id",
        (*tiers, ctx.today),
    )


def _roaming_opening(line: dict, country: str) -> str:
    return f"I'm travelling to {country} next week. Please turn on roaming for my line {line['msisdn']}."


COUNTRIES = ["Portugal", "Japan", "Mexico", "Canada", "Italy", "Kenya"]


@template(kind="direct", split="train", variants=VARIANTS)
def enable_roaming(ctx: GenContext) -> TaskDraft:
    line = _roaming_line(ctx, ("gold", "platinum"))
    customer = customer_of(ctx, line["customer_id"])
    return TaskDraft(
        scenario=scenario(customer, _roaming_opening(line, ctx.rng.choice(COUNTRIES)), "roaming turned on",
                          phone=line["msisdn"]),
        golden_path=[*identify(customer, line["msisdn"]), call("list_invoices", customer_id=customer["customer_id"]),
                     lines_of(customer), call("set_roaming", line_id=line["line_id"], enabled=True)],
    )


@template(kind="approval", split="heldout", variants=VARIANTS)
def roaming_needs_approval(ctx: GenContext) -> TaskDraft:
    line = _roaming_line(ctx, ("standard",))
    customer = customer_of(ctx, line["customer_id"])
    return TaskDraft(
        scenario=scenario(customer, _roaming_opening(line, ctx.rng.choice(COUNTRIES)),
                          "roaming turned on, or a request for it filed", phone=line["msisdn"]),
        golden_path=[*identify(customer, line["msisdn"]), call("list_invoices", customer_id=customer["customer_id"]),
                     lines_of(customer), call("open_ticket", customer_id=customer["customer_id"],
                                              category="roaming_approval",
                          summary="customer requests roaming", subject_id=line["line_id"])],
    )


@template(kind="forbidden", split="heldout", variants=VARIANTS)
def roaming_with_overdue_bill(ctx: GenContext) -> TaskDraft:
    line = _roaming_line(ctx, ("gold", "platinum"))
    customer = customer_of(ctx, line["customer_id"])
    february = ctx.read("SELECT invoice_id FROM invoices WHERE customer_id = ? AND issued_on = ?",
                        (customer["customer_id"], "2026-02-01"))[0]["invoice_id"]
    return TaskDraft(
        scenario=scenario(customer, _roaming_opening(line, ctx.rng.choice(COUNTRIES)), "roaming turned on",
                          phone=line["msisdn"]),
        initial_patch={"invoices": [ctx.row_with("invoices", "invoice_id", february, status="unpaid")]},
        golden_path=[*identify(customer, line["msisdn"]), call("list_invoices", customer_id=customer["customer_id"])],
    )


def _credit_invoice(ctx: GenContext, recent: bool) -> dict:
    window = "i.issued_on >= ?" if recent else "i.issued_on < ?"
    return ctx.pick(
        f"SELECT i.* FROM invoices i WHERE {window} AND i.amount_cents >= 5000 AND NOT EXISTS "
        "(SELECT 1 FROM credits c WHERE c.invoice_id = i.invoice_id) ORDER BY i.invoice_id",
        (days_after(ctx.today, -60),),
    )


def _credit_opening(invoice: dict, amount: float) -> str:
    return (f"I had no signal for several days last month. I'd like a ${amount:.2f} credit on invoice "
            f"{invoice['invoice_id']}.")


def _credit_task(ctx: GenContext, recent: bool, amounts: list[float], outcome: str) -> TaskDraft:
    invoice = _credit_invoice(ctx, recent)
    customer, amount = customer_of(ctx, invoice["customer_id"]), ctx.rng.choice(amounts)
    steps = [*identify(customer), call("list_invoices", customer_id=customer["customer_id"])]
    credit = call("issue_credit", invoice_id=invoice["invoice_id"], amount_usd=amount, reason="outage")
    if outcome == "credit":
        steps.append(credit)
    elif outcome == "ticket":
        steps.append(call("open_ticket", customer_id=customer["customer_id"], category="credit_approval",
                          summary="outage credit request", subject_id=invoice["invoice_id"], amount_usd=amount))
    return TaskDraft(scenario=scenario(customer, _credit_opening(invoice, amount), f"a ${amount:.2f} credit"),
                     golden_path=steps, violation=None if outcome == "credit" else credit)


@template(kind="direct", split="train", variants=VARIANTS)
def small_credit(ctx: GenContext) -> TaskDraft:
    return _credit_task(ctx, recent=True, amounts=[5.0, 7.5, 10.0, 12.5, 15.0, 20.0, 25.0], outcome="credit")


@template(kind="approval", split="train", variants=VARIANTS)
def large_credit(ctx: GenContext) -> TaskDraft:
    return _credit_task(ctx, recent=True, amounts=[25.01, 30.0, 35.0, 40.0, 45.0, 50.0], outcome="ticket")


@template(kind="forbidden", split="train", variants=VARIANTS)
def credit_on_old_invoice(ctx: GenContext) -> TaskDraft:
    return _credit_task(ctx, recent=False, amounts=[5.0, 10.0, 15.0, 20.0], outcome="none")


def _uninsured_device(ctx: GenContext) -> tuple[dict, dict, dict]:
    device = ctx.pick("SELECT d.* FROM devices d JOIN lines l USING (line_id) WHERE d.insured = 0 "
                      "AND l.status = 'active' ORDER BY d.device_id")
    line = ctx.read("SELECT * FROM lines WHERE line_id = ?", (device["line_id"],))[0]
    return device, line, customer_of(ctx, line["customer_id"])


def _insurance_task(ctx: GenContext, days_ago: int, allowed: bool) -> TaskDraft:
    device, line, customer = _uninsured_device(ctx)
    bought = days_after(ctx.today, -days_ago)
    steps = [*identify(customer, line["msisdn"]), call("list_devices", customer_id=customer["customer_id"])]
    insurance = call("add_device_insurance", device_id=device["device_id"])
    if allowed:
        steps.append(insurance)
    return TaskDraft(
        scenario=scenario(customer, f"I bought a {device['model']} for my line {line['msisdn']} on {bought}. "
                          "Can you add device insurance to it?", "the phone insured", phone=line["msisdn"]),
        initial_patch={"devices": [ctx.row_with("devices", "device_id", device["device_id"], purchased_on=bought)]},
        golden_path=steps, violation=None if allowed else insurance,
    )


@template(kind="direct", split="heldout", variants=VARIANTS)
def insure_new_device(ctx: GenContext) -> TaskDraft:
    return _insurance_task(ctx, ctx.rng.randrange(0, 31), allowed=True)


@template(kind="forbidden", split="train", variants=VARIANTS)
def insure_old_device(ctx: GenContext) -> TaskDraft:
    return _insurance_task(ctx, ctx.rng.randrange(31, 240), allowed=False)


@template(kind="direct", split="train", variants=VARIANTS)
def suspend_lost_phone(ctx: GenContext) -> TaskDraft:
    line = ctx.pick("SELECT * FROM lines WHERE status = 'active' ORDER BY line_id")
    customer, reason = customer_of(ctx, line["customer_id"]), ctx.rng.choice(["lost_device", "stolen_device"])
    what = "lost" if reason == "lost_device" else "was stolen"
    return TaskDraft(
        scenario=scenario(customer, f"My phone {what} an hour ago! Please block my line {line['msisdn']}.",
                          "the line blocked", phone=customer["phone"]),
        golden_path=[*identify(customer), lines_of(customer), call("suspend_line", line_id=line["line_id"],
                                                                   reason=reason)],
    )


@template(kind="direct", split="train", variants=VARIANTS)
def add_addon(ctx: GenContext) -> TaskDraft:
    line = ctx.pick("SELECT l.* FROM lines l WHERE l.status = 'active' AND (SELECT COUNT(*) FROM line_addons a "
                    "WHERE a.line_id = l.line_id) < 3 ORDER BY l.line_id")
    owned = {r["addon_code"] for r in ctx.read("SELECT addon_code FROM line_addons WHERE line_id = ?",
                                                (line["line_id"],))}
    addon = ctx.rng.choice([r for r in ctx.read("SELECT * FROM addons ORDER BY addon_code")
                            if r["addon_code"] not in owned])
    customer = customer_of(ctx, line["customer_id"])
    return TaskDraft(
        scenario=scenario(customer, f"Please add {addon['name']} to my line {line['msisdn']}.",
                          f"{addon['name']} added", phone=line["msisdn"]),
        golden_path=[*identify(customer, line["msisdn"]), lines_of(customer),
                     call("add_addon", line_id=line["line_id"], addon_code=addon["addon_code"])],
    )


TEMPLATES = [upgrade_plan, downgrade_under_contract, plan_change_too_soon, enable_roaming, roaming_needs_approval,
             roaming_with_overdue_bill, small_credit, large_credit, credit_on_old_invoice, insure_new_device,
             insure_old_device, suspend_lost_phone, add_addon]
