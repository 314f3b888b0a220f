"""Shared pieces of clinic task templates: who the caller is, how the desk verifies them, how times read.

Templates describe a situation; these helpers keep the caller's facts, the golden identification steps and
the phrasing of dates, times and money identical across them, so rubrics and openings agree.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from envs.domains.clinic.catalog import PRACTITIONERS
from envs.sdk import Fact, GenContext, ToolCall, UserScenario, call

NOT_KNOWN_TO_PATIENTS = ("patient id", "slot id", "fee id", "prescription id", "referral id", "rx id")
PRACTITIONER = {p[0]: {"name": p[1], "specialty": p[2], "fee_cents": p[4]} for p in PRACTITIONERS}


def surname(practitioner_id: str) -> str:
    """'Dr. Amara Okonjo' -> 'Okonjo'; 'Maeve Donnelly, DPT' -> 'Donnelly'."""
    return PRACTITIONER[practitioner_id]["name"].split(",")[0].split()[-1]


def patient(ctx: GenContext, patient_id: str) -> dict[str, Any]:
    return ctx.read("SELECT * FROM patients WHERE patient_id = ?", (patient_id,))[0]


def any_patient(ctx: GenContext) -> dict[str, Any]:
    """A patient drawn by this variant's Random (for requests that fit anyone, such as a GP booking)."""
    ids = ctx.read("SELECT patient_id FROM patients ORDER BY patient_id")
    return patient(ctx, ctx.rng.choice(ids)["patient_id"])


def caller(person: dict[str, Any], opening: str, goal: str) -> UserScenario:
    """The simulated patient: knows their contact details, birth date and postcode, never internal ids."""
    return UserScenario(
        opening=opening,
        goal=goal,
        persona=f"{person['full_name']}, a patient of the clinic who answers briefly and a little hurriedly",
        facts=(
            Fact(name="phone number", value=person["phone"], keywords=("phone", "telephone", "mobile")),
            Fact(name="email address", value=person["email"], keywords=("email", "e mail")),
            Fact(name="date of birth", value=person["date_of_birth"], keywords=("birth", "dob", "born")),
            Fact(name="postcode", value=person["postcode"], keywords=("postcode", "post code", "zip", "postal")),
        ),
        unknown=NOT_KNOWN_TO_PATIENTS,
    )


def verify(person: dict[str, Any]) -> list[ToolCall]:
    """The golden opening of every task: find the caller by phone, then verify birth date and postcode."""
    return [call("find_patient", phone=person["phone"]),
            call("verify_patient", patient_id=person["patient_id"], date_of_birth=person["date_of_birth"],
                 postcode=person["postcode"])]


def when(starts_at: str) -> str:
    """'2026-05-20T10:30' -> 'Wednesday May 20 at 10:30', as a patient would say it."""
    moment = datetime.fromisoformat(starts_at)
    return f"{moment:%A %B} {moment.day} at {moment:%H:%M}"


def count_phrases(n: int, noun: str) -> tuple[str, ...]:
    """'2 refills', 'two refills' (singular for one)."""
    words = ["no", "one", "two", "three", "four", "five", "six"]
    plural = noun if n == 1 else f"{noun}s"
    return (f"{n} {plural}", f"{words[n]} {plural}") if n < len(words) else (f"{n} {plural}",)
