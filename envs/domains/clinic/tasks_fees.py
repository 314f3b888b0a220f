"""Cancellation and fee templates: free and late cancellations, fee waivers within and beyond the desk's limit."""

from __future__ import annotations

from envs.domains.clinic.scenario import PRACTITIONER, caller, patient, verify, when
from envs.sdk import GenContext, Rubric, TaskDraft, call, days_after, money_phrases, spoken_date, template, usd

UPCOMING = ("SELECT * FROM appointments WHERE status = 'booked' AND substr(starts_at, 1, 10) BETWEEN ? AND ? "
            "ORDER BY appointment_id")
# unpaid fees of patients with no waiver in the last 365 days, within an amount band
WAIVABLE = ("SELECT f.* FROM fees f WHERE f.status = 'unpaid' AND f.amount_cents BETWEEN ? AND ? AND NOT EXISTS "
            "(SELECT 1 FROM fees w WHERE w.patient_id = f.patient_id AND w.waived_on >= ?) ORDER BY f.fee_id")
DESK_WAIVER_LIMIT = 5000


def _cancellation(ctx: GenContext, first_day: int, last_day: int) -> tuple[dict, dict, str]:
    visit = ctx.pick(UPCOMING, (days_after(ctx.today, first_day), days_after(ctx.today, last_day)))
    opening = (f"I need to cancel my appointment with {PRACTITIONER[visit['practitioner_id']]['name']} on "
               f"{when(visit['starts_at'])}.")
    return visit, patient(ctx, visit["patient_id"]), opening


@template(kind="direct", split="train", variants=12)
def cancel_with_notice(ctx: GenContext) -> TaskDraft:
    visit, person, opening = _cancellation(ctx, 2, 45)
    return TaskDraft(
        scenario=caller(person, opening, "the appointment cancelled"),
        golden_path=[*verify(person), call("list_appointments", patient_id=person["patient_id"]),
                     call("cancel_appointment", appointment_id=visit["appointment_id"])],
    )


@template(kind="direct", split="train", variants=10)
def cancel_late_with_fee(ctx: GenContext) -> TaskDraft:
    visit, person, opening = _cancellation(ctx, 0, 1)
    fee = PRACTITIONER[visit["practitioner_id"]]["fee_cents"]
    return TaskDraft(
        scenario=caller(person, opening + " Something came up at work.", "the appointment cancelled"),
        golden_path=[*verify(person), call("list_appointments", patient_id=person["patient_id"]),
                     call("cancel_appointment", appointment_id=visit["appointment_id"]),
                     call("charge_fee", appointment_id=visit["appointment_id"], kind="late_cancellation")],
        rubrics=[Rubric(kind="must_mention", phrases=money_phrases(fee), description="states the late fee")],
        reference_answer=f"Your appointment is cancelled. As it was at short notice, a ${usd(fee)} late-cancellation "
                         "fee applies.",
    )


def _fee_case(ctx: GenContext, low: int, high: int) -> tuple[dict, dict, str]:
    fee = ctx.pick(WAIVABLE, (low, high, days_after(ctx.today, -365)))
    what = "missing" if fee["kind"] == "no_show" else "cancelling late for"
    opening = (f"I was charged ${usd(fee['amount_cents'])} for {what} my appointment on "
               f"{spoken_date(fee['charged_on'])}. I had a family emergency; could you waive that fee?")
    return fee, patient(ctx, fee["patient_id"]), opening


def _read_fees(person: dict) -> list:
    return [*verify(person), call("list_fees", patient_id=person["patient_id"])]


@template(kind="direct", split="train", variants=12)
def waive_small_fee(ctx: GenContext) -> TaskDraft:
    fee, person, opening = _fee_case(ctx, 1, DESK_WAIVER_LIMIT)
    return TaskDraft(scenario=caller(person, opening, "the fee waived"),
                     golden_path=[*_read_fees(person), call("waive_fee", fee_id=fee["fee_id"])])


@template(kind="approval", split="heldout", variants=10)
def large_fee_waiver_needs_manager(ctx: GenContext) -> TaskDraft:
    fee, person, opening = _fee_case(ctx, DESK_WAIVER_LIMIT + 1, 10**6)
    return TaskDraft(
        scenario=caller(person, opening, "the fee waived, or a waiver requested"),
        golden_path=[*_read_fees(person),
                     call("open_request", patient_id=person["patient_id"], category="fee_waiver_approval",
                          note="waiver requested after a family emergency", subject_id=fee["fee_id"],
                          amount_usd=fee["amount_cents"] / 100)],
    )


@template(kind="forbidden", split="heldout", variants=10)
def second_waiver_within_a_year(ctx: GenContext) -> TaskDraft:
    fee, person, opening = _fee_case(ctx, 1, DESK_WAIVER_LIMIT)
    charged = days_after(ctx.today, -ctx.rng.randrange(30, 340))
    earlier = {"fee_id": f"FE-59{ctx.variant:04d}", "patient_id": person["patient_id"], "appointment_id": None,
               "kind": "no_show", "amount_cents": fee["amount_cents"], "status": "waived", "charged_on": charged,
               "waived_on": days_after(charged, 4)}
    return TaskDraft(scenario=caller(person, opening, "the fee waived"), initial_patch={"fees": [earlier]},
                     golden_path=_read_fees(person))


TEMPLATES = [cancel_with_notice, cancel_late_with_fee, waive_small_fee, large_fee_waiver_needs_manager,
             second_waiver_within_a_year]
