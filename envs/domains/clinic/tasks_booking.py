"""Booking templates: family-doctor and specialist visits, the booking window, imaging pre-authorisation."""

from __future__ import annotations

from typing import Any

from envs.domains.clinic.catalog import FAMILY_MEDICINE, IMAGING, PROCEDURES
from envs.domains.clinic.scenario import PRACTITIONER, any_patient, caller, patient, verify, when
from envs.sdk import GenContext, TaskDraft, call, days_after, template

OPEN_SLOTS = ("SELECT s.* FROM slots s JOIN practitioners p USING (practitioner_id) WHERE s.status = 'open' "
              "AND p.specialty IN ({}) AND substr(s.starts_at, 1, 10) BETWEEN ? AND ? ORDER BY s.slot_id")
USABLE_REFERRALS = ("SELECT * FROM referrals WHERE visits_used < visits_allowed AND expires_on >= ? "
                    "ORDER BY referral_id")


def _slot_request(slot: dict) -> str:
    return f"the {when(slot['starts_at'])} appointment with {PRACTITIONER[slot['practitioner_id']]['name']}"


def _look_for_slot(slot: dict) -> list:
    return [call("list_practitioners", specialty=PRACTITIONER[slot["practitioner_id"]]["specialty"]),
            call("list_open_slots", practitioner_id=slot["practitioner_id"], from_date=slot["starts_at"][:10])]


@template(kind="direct", split="train", variants=12)
def book_primary_care(ctx: GenContext) -> TaskDraft:
    slot = ctx.pick(OPEN_SLOTS.format("?, ?"), (FAMILY_MEDICINE, "Physiotherapy", days_after(ctx.today, 1),
                                                days_after(ctx.today, 60)))
    person = any_patient(ctx)
    return TaskDraft(
        scenario=caller(person, f"Hello, could I book {_slot_request(slot)}, please?", "that slot booked"),
        golden_path=[*verify(person), *_look_for_slot(slot),
                     call("book_appointment", patient_id=person["patient_id"], slot_id=slot["slot_id"])],
    )


@template(kind="forbidden", split="train", variants=10)
def slot_outside_booking_window(ctx: GenContext) -> TaskDraft:
    """Same-day slots and slots more than 60 days ahead are both off limits."""
    slot = ctx.pick(
        "SELECT s.* FROM slots s JOIN practitioners p USING (practitioner_id) WHERE s.status = 'open' "
        "AND p.specialty = ? AND (substr(s.starts_at, 1, 10) = ? OR substr(s.starts_at, 1, 10) > ?) "
        "ORDER BY s.slot_id", (FAMILY_MEDICINE, ctx.today, days_after(ctx.today, 60)))
    person = any_patient(ctx)
    return TaskDraft(
        scenario=caller(person, f"I'd like {_slot_request(slot)}. Can you book it for me?", "that slot booked"),
        golden_path=[*verify(person), *_look_for_slot(slot)],
    )


def _referral_and_slot(ctx: GenContext) -> tuple[dict, dict, dict]:
    """A usable referral, its patient, and an open slot of that specialty inside the referral and the window."""
    referral = ctx.pick(USABLE_REFERRALS, (days_after(ctx.today, 8),))
    last_day = min(referral["expires_on"], days_after(ctx.today, 60))
    slots = ctx.read(OPEN_SLOTS.format("?"), (referral["specialty"], days_after(ctx.today, 1), last_day))
    return referral, patient(ctx, referral["patient_id"]), ctx.rng.choice(slots)


def _referral_opening(referral: dict, slot: dict) -> str:
    return (f"My family doctor referred me to {referral['specialty'].lower()}. Could I have "
            f"{_slot_request(slot)}?")


@template(kind="direct", split="heldout", variants=10)
def book_specialist_on_referral(ctx: GenContext) -> TaskDraft:
    referral, person, slot = _referral_and_slot(ctx)
    return TaskDraft(
        scenario=caller(person, _referral_opening(referral, slot), "the specialist appointment booked"),
        golden_path=[*verify(person), call("list_referrals", patient_id=person["patient_id"]), *_look_for_slot(slot),
                     call("book_appointment", patient_id=person["patient_id"], slot_id=slot["slot_id"],
                          referral_id=referral["referral_id"])],
    )


@template(kind="forbidden", split="train", variants=12)
def specialist_referral_lapsed(ctx: GenContext) -> TaskDraft:
    """Alternately expired or with every visit used: either way the specialist cannot be booked."""
    referral, person, slot = _referral_and_slot(ctx)
    lapse = ({"expires_on": days_after(ctx.today, -ctx.rng.randrange(1, 45))} if ctx.variant % 2
             else {"visits_used": referral["visits_allowed"]})
    return TaskDraft(
        scenario=caller(person, _referral_opening(referral, slot), "the specialist appointment booked"),
        initial_patch={"referrals": [ctx.row_with("referrals", "referral_id", referral["referral_id"], **lapse)]},
        golden_path=[*verify(person), call("list_referrals", patient_id=person["patient_id"])],
    )


def _imaging_request(ctx: GenContext) -> tuple[dict[str, Any], tuple, dict[str, Any]]:
    """An insured patient with no pre-authorisation history, a scan priced above their threshold, a scan slot."""
    person = ctx.pick(
        "SELECT p.*, i.preauth_threshold_cents FROM patients p JOIN insurance_plans i USING (plan_code) "
        "WHERE i.preauth_threshold_cents IS NOT NULL AND NOT EXISTS (SELECT 1 FROM preauthorisations a "
        "WHERE a.patient_id = p.patient_id) ORDER BY p.patient_id")
    code = ctx.rng.choice([code for code, _, price in PROCEDURES if price > person["preauth_threshold_cents"]])
    window = (days_after(ctx.today, 3), days_after(ctx.today, 30))
    slot = ctx.rng.choice(ctx.read(OPEN_SLOTS.format("?"), (IMAGING, *window)))
    return person, next(p for p in PROCEDURES if p[0] == code), slot


def _imaging_opening(procedure: tuple, slot: dict) -> str:
    return f"My doctor has ordered a scan for me ({procedure[1]}). Can you book me into {_slot_request(slot)}?"


@template(kind="approval", split="train", variants=12)
def imaging_needs_preauthorisation(ctx: GenContext) -> TaskDraft:
    person, procedure, slot = _imaging_request(ctx)
    return TaskDraft(
        scenario=caller(person, _imaging_opening(procedure, slot), "the scan booked, or the insurer asked"),
        golden_path=[*verify(person), call("list_coverage", patient_id=person["patient_id"]),
                     call("list_procedures"),
                     call("submit_preauthorisation", patient_id=person["patient_id"], procedure_code=procedure[0])],
    )


@template(kind="direct", split="train", variants=10)
def imaging_with_approved_preauthorisation(ctx: GenContext) -> TaskDraft:
    person, procedure, slot = _imaging_request(ctx)
    approval = {"auth_id": f"PA-69{ctx.variant:04d}", "patient_id": person["patient_id"],
                "procedure_code": procedure[0], "status": "approved", "submitted_on": days_after(ctx.today, -12),
                "decided_on": days_after(ctx.today, -ctx.rng.randrange(1, 9))}
    return TaskDraft(
        scenario=caller(person, f"{_imaging_opening(procedure, slot)} My insurer has approved it.",
                        "the scan booked"),
        initial_patch={"preauthorisations": [approval]},
        golden_path=[*verify(person), call("list_coverage", patient_id=person["patient_id"]),
                     *_look_for_slot(slot),
                     call("book_appointment", patient_id=person["patient_id"], slot_id=slot["slot_id"],
                          procedure_code=procedure[0])],
    )


TEMPLATES = [book_primary_care, slot_outside_booking_window, book_specialist_on_referral, specialist_referral_lapsed,
             imaging_needs_preauthorisation, imaging_with_approved_preauthorisation]
