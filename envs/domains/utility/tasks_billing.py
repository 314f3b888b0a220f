"""Utility templates about money: bill adjustments, bill disputes and payment plans."""

from __future__ import annotations

from datetime import date
from typing import Any

from envs.domains.utility.scenario import caller, holder, verification
from envs.sdk import GenContext, TaskDraft, ToolCall, UserScenario, call, days_after, template, usd

VARIANTS = 8
UNADJUSTED = "NOT EXISTS (SELECT 1 FROM adjustments ad WHERE ad.bill_id = b.bill_id)"


def _bill(ctx: GenContext, issued_within: int, recent: bool, extra: str = "1 = 1") -> dict[str, Any]:
    """A bill issued within `issued_within` days of today (recent) or before that (not recent)."""
    window = "b.issued_on >= date(?, ?)" if recent else "b.issued_on < date(?, ?)"
    return ctx.pick(f"SELECT b.* FROM bills b WHERE {window} AND {extra} ORDER BY b.bill_id",
                    (ctx.today, f"-{issued_within} days"))


def _month(bill: dict[str, Any]) -> str:
    return date.fromisoformat(bill["issued_on"]).strftime("%B")


def _adjustment_task(ctx: GenContext, recent: bool, amounts: list[float], approval: bool) -> TaskDraft:
    bill = _bill(ctx, 120, recent, UNADJUSTED)
    person, amount = holder(ctx, bill["account_id"]), ctx.rng.choice(amounts)
    steps = [*verification(person), call("list_bills", account_id=person["account_id"])]
    if recent and approval:
        steps.append(call("open_case", account_id=person["account_id"], category="adjustment_approval",
                          summary="service guarantee credit after outage", subject_id=bill["bill_id"],
                          amount_usd=amount))
    elif recent:
        steps.append(call("apply_bill_adjustment", bill_id=bill["bill_id"], amount_usd=amount,
                          reason="service guarantee credit after outage"))
    hours = ctx.rng.choice([14, 20, 26, 31, 40])
    return TaskDraft(
        scenario=caller(person, f"We lost power for {hours} hours during the storm. Your outage line promised a "
                        f"${amount:.2f} service-guarantee credit on my {_month(bill)} bill. Can you apply it?",
                        f"a ${amount:.2f} credit on the {_month(bill)} bill"),
        golden_path=steps,
    )


@template(kind="direct", split="train", variants=VARIANTS)
def outage_credit_within_limit(ctx: GenContext) -> TaskDraft:
    return _adjustment_task(ctx, True, [12.5, 15.0, 20.0, 25.0, 30.0, 35.5, 40.0], approval=False)


@template(kind="approval", split="train", variants=VARIANTS + 2)
def outage_credit_over_limit(ctx: GenContext) -> TaskDraft:
    return _adjustment_task(ctx, True, [40.5, 45.0, 55.0, 60.0], approval=True)


@template(kind="forbidden", split="train", variants=VARIANTS)
def credit_on_bill_past_window(ctx: GenContext) -> TaskDraft:
    return _adjustment_task(ctx, False, [15.0, 20.0, 30.0], approval=False)


def _dispute_task(ctx: GenContext, recent: bool) -> TaskDraft:
    bill = _bill(ctx, 90, recent)
    person = holder(ctx, bill["account_id"])
    category, why = (("estimated_read", "it was based on an estimated reading, not a real one")
                     if bill["estimated"] else ("high_bill", "it is far higher than we ever use"))
    steps = [*verification(person), call("list_bills", account_id=person["account_id"])]
    if recent:
        steps.append(call("open_dispute", bill_id=bill["bill_id"], category=category, details=why))
    return TaskDraft(
        scenario=caller(person, f"I want to formally dispute my {_month(bill)} bill of "
                        f"${usd(bill['amount_cents'])}: {why}. Please open a dispute "
                        f"({category.replace('_', ' ')}).",
                        f"a dispute opened on the {_month(bill)} bill"),
        golden_path=steps,
    )


@template(kind="direct", split="train", variants=VARIANTS)
def dispute_recent_bill(ctx: GenContext) -> TaskDraft:
    return _dispute_task(ctx, recent=True)


@template(kind="forbidden", split="train", variants=VARIANTS)
def dispute_after_ninety_days(ctx: GenContext) -> TaskDraft:
    return _dispute_task(ctx, recent=False)


BALANCES = (
    "SELECT b.account_id, SUM(b.balance_cents) AS owed FROM bill_balances b WHERE b.status = 'unpaid' AND NOT EXISTS "
    "(SELECT 1 FROM payment_plans pp WHERE pp.account_id = b.account_id AND (pp.status = 'active' OR "
    "(pp.status = 'defaulted' AND pp.created_on >= date(?, '-365 days')))) AND (? IS NULL OR b.account_id IN "
    "(SELECT a.account_id FROM accounts a WHERE a.assistance_program = ?)) GROUP BY b.account_id "
    "HAVING owed BETWEEN ? AND ? ORDER BY b.account_id"
)


def _plan_request(ctx: GenContext, low: int, high: int,
                  program: str | None = None) -> tuple[dict[str, Any], dict[str, Any], int]:
    """An account with no active or recently defaulted plan, owing between `low` and `high` cents.

    With `program` = "CARE" the account is CARE-enrolled and asks for the longer terms only CARE allows.
    """
    row = ctx.pick(BALANCES, (ctx.today, program, program, low, high))
    months = ctx.rng.choice([7, 8, 9, 10, 12] if program == "CARE" else [2, 3, 4, 5, 6])
    return row, holder(ctx, row["account_id"]), months


def _plan_scenario(person: dict[str, Any], months: int) -> UserScenario:
    return caller(person, f"Money is tight this spring and I've fallen behind. Could I pay off everything I owe "
                  f"in {months} monthly installments?", f"a {months}-month payment plan")


def _plan_checks(person: dict[str, Any]) -> list[ToolCall]:
    return [*verification(person), call("list_bills", account_id=person["account_id"]),
            call("list_payment_plans", account_id=person["account_id"])]


@template(kind="direct", split="train", variants=VARIANTS)
def payment_plan_for_arrears(ctx: GenContext) -> TaskDraft:
    _, person, months = _plan_request(ctx, 10000, 100000)
    return TaskDraft(scenario=_plan_scenario(person, months),
                     golden_path=[*_plan_checks(person),
                                  call("create_payment_plan", account_id=person["account_id"], installments=months)])


@template(kind="direct", split="train", variants=VARIANTS)
def long_payment_plan_for_care_household(ctx: GenContext) -> TaskDraft:
    _, person, months = _plan_request(ctx, 10000, 100000, program="CARE")
    return TaskDraft(scenario=_plan_scenario(person, months),
                     golden_path=[*_plan_checks(person), call("get_account", account_id=person["account_id"]),
                                  call("create_payment_plan", account_id=person["account_id"], installments=months)])


@template(kind="approval", split="train", variants=VARIANTS + 2)
def payment_plan_over_limit(ctx: GenContext) -> TaskDraft:
    row, person, months = _plan_request(ctx, 100001, 10**7)
    return TaskDraft(scenario=_plan_scenario(person, months),
                     golden_path=[*_plan_checks(person),
                                  call("open_case", account_id=person["account_id"], category="payment_plan_approval",
                                       summary=f"{months}-month plan requested", amount_usd=row["owed"] / 100)])


@template(kind="forbidden", split="train", variants=VARIANTS)
def payment_plan_after_default(ctx: GenContext) -> TaskDraft:
    row, person, months = _plan_request(ctx, 10000, 100000)
    created = days_after(ctx.today, -ctx.rng.randrange(30, 330))
    defaulted = {"plan_id": "PP-29901", "account_id": person["account_id"], "total_cents": row["owed"],
                 "installments": 4, "installment_cents": -(-row["owed"] // 4),
                 "first_due_on": days_after(created, 14), "status": "defaulted", "created_on": created}
    return TaskDraft(scenario=_plan_scenario(person, months), golden_path=_plan_checks(person),
                     initial_patch={"payment_plans": [defaulted]})


TEMPLATES = [outage_credit_within_limit, outage_credit_over_limit, credit_on_bill_past_window, dispute_recent_bill,
             dispute_after_ninety_days, payment_plan_for_arrears, long_payment_plan_for_care_household,
             payment_plan_over_limit, payment_plan_after_default]
