"""Prescription templates: a refill that is due, one asked for too early, and a controlled medicine."""

from __future__ import annotations

from envs.domains.clinic.scenario import caller, patient, verify
from envs.sdk import GenContext, Rubric, TaskDraft, call, date_phrases, days_after, spoken_date, template

REFILLABLE = ("SELECT * FROM prescriptions WHERE status = 'active' AND refills_left > 0 AND controlled = ? "
              "ORDER BY rx_id")


def _refill_case(ctx: GenContext, controlled: bool, days_before_running_out: int) -> tuple[dict, dict, dict]:
    """A refillable prescription whose supply runs out `days_before_running_out` days from today (patched)."""
    rx = ctx.pick(REFILLABLE, (int(controlled),))
    last_fill = days_after(ctx.today, days_before_running_out - rx["days_supply"])
    patch = {"prescriptions": [ctx.row_with("prescriptions", "rx_id", rx["rx_id"], last_filled_on=last_fill)]}
    return rx | {"last_filled_on": last_fill}, patient(ctx, rx["patient_id"]), patch


def _refill_opening(rx: dict) -> str:
    return f"Hi, I'm running low on my {rx['medication']}. Could you send a refill to my pharmacy?"


def _asks_for_refill(ctx: GenContext, controlled: bool, days_before_running_out: int, outcome: str) -> TaskDraft:
    """A patient asks for a refill the policy allows; `outcome` is the one write it calls for."""
    rx, person, patch = _refill_case(ctx, controlled, days_before_running_out)
    write = (call("request_refill", rx_id=rx["rx_id"]) if outcome == "refill" else
             call("open_request", patient_id=person["patient_id"], category="controlled_refill_review",
                  note=f"refill requested for {rx['medication']}", subject_id=rx["rx_id"]))
    goal = "the refill sent to the pharmacy" if outcome == "refill" else "the refill sent, or passed to the prescriber"
    return TaskDraft(scenario=caller(person, _refill_opening(rx), goal),
                     initial_patch=patch, golden_path=[*_read_prescriptions(person), write])


def _read_prescriptions(person: dict) -> list:
    return [*verify(person), call("list_prescriptions", patient_id=person["patient_id"])]


@template(kind="direct", split="train", variants=12)
def refill_when_due(ctx: GenContext) -> TaskDraft:
    return _asks_for_refill(ctx, controlled=False, days_before_running_out=ctx.rng.randrange(-10, 8),
                            outcome="refill")


@template(kind="forbidden", split="train", variants=12)
def refill_too_early(ctx: GenContext) -> TaskDraft:
    rx, person, patch = _refill_case(ctx, controlled=False, days_before_running_out=ctx.rng.randrange(10, 25))
    first_day = days_after(rx["last_filled_on"], rx["days_supply"] - 7)
    return TaskDraft(
        scenario=caller(person, _refill_opening(rx) + " I'm going away for a few weeks.",
                        "the refill sent to the pharmacy"),
        initial_patch=patch,
        golden_path=_read_prescriptions(person),
        rubrics=[Rubric(kind="must_mention", phrases=date_phrases(first_day, ctx.today),
                        description="tells the patient the first date a refill can be requested")],
        reference_answer=(f"It is too early to refill your {rx['medication']}: refills can be requested from "
                          f"{spoken_date(first_day)}, seven days before your supply runs out."),
    )


@template(kind="approval", split="train", variants=12)
def controlled_refill_needs_review(ctx: GenContext) -> TaskDraft:
    return _asks_for_refill(ctx, controlled=True, days_before_running_out=ctx.rng.randrange(-5, 8),
                            outcome="review")


TEMPLATES = [refill_when_due, refill_too_early, controlled_refill_needs_review]
