"""Seeded rows for the clinic template: 1,100 patients, their visits, referrals, prescriptions and fees, and a
15-week slot calendar.

Everything is drawn from the Random passed in, so one seed always yields one database. Specialist bookings
are made against real referrals (and use up their visits), so the seeded history obeys the policy it tests.
"""

from __future__ import annotations

import random
import sqlite3
from collections import defaultdict
from datetime import date, timedelta

from envs.domains.clinic.catalog import (
    FAMILY,
    GIVEN,
    IMAGING,
    INSURANCE_PLANS,
    MEDICINES,
    PHARMACIES,
    PLAN_WEIGHTS,
    POSTCODES,
    PRACTITIONERS,
    PROCEDURES,
    SPECIALTIES_NEEDING_REFERRAL,
)

TODAY = date(2026, 5, 11)
PATIENTS = 1100
CALENDAR_START, CALENDAR_END = -14, 75  # slot calendar, in days from today


def day(offset: int) -> str:
    """ISO date `offset` days from today (negative: in the past)."""
    return (TODAY + timedelta(days=offset)).isoformat()


class _Ids:
    """Sequential seeded ids per prefix, e.g. AP-200001."""

    def __init__(self) -> None:
        self._next: dict[str, int] = defaultdict(int)

    def __call__(self, prefix: str, base: int) -> str:
        self._next[prefix] += 1
        return f"{prefix}-{base + self._next[prefix]}"


def populate(conn: sqlite3.Connection, rng: random.Random) -> None:
    conn.executemany("INSERT INTO insurance_plans VALUES (?, ?, ?, ?)", INSURANCE_PLANS)
    conn.executemany("INSERT INTO practitioners VALUES (?, ?, ?, ?, ?)", PRACTITIONERS)
    conn.executemany("INSERT INTO procedures VALUES (?, ?, ?)", PROCEDURES)
    ids = _Ids()
    patients = _patients(conn, rng)
    referrals = _referrals(conn, rng, ids, patients)
    _calendar(conn, rng, ids, patients, referrals)
    _history(conn, rng, ids, patients)
    _prescriptions(conn, rng, ids, patients)
    _coverage_and_requests(conn, rng, ids, patients)


def _patients(conn: sqlite3.Connection, rng: random.Random) -> list[str]:
    ids = []
    for n in range(PATIENTS):
        patient_id = f"PT-{100001 + n}"
        given, family = rng.choice(GIVEN), rng.choice(FAMILY)
        plan = rng.choices(INSURANCE_PLANS, weights=PLAN_WEIGHTS)[0]
        member = None if plan[3] is None else f"{plan[0][:2]}{rng.randrange(10**8, 10**9)}"
        born = date(1942, 1, 1) + timedelta(days=rng.randrange(0, 80 * 365))
        conn.execute(
            "INSERT INTO patients VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (patient_id, f"{given} {family}", born.isoformat(), rng.choice(POSTCODES), f"503-555-{1000 + n:04d}",
             f"{given}.{family}{n}@mailbox.example".lower(), plan[0], member, rng.choice(PHARMACIES),
             day(-rng.randrange(30, 4000)), round(rng.uniform(0.02, 0.6), 2), rng.randrange(120, 990)),
        )
        ids.append(patient_id)
    return ids


def _referrals(conn: sqlite3.Connection, rng: random.Random, ids: _Ids, patients: list[str]) -> dict[str, list]:
    """Referrals by specialty, as mutable [referral_id, patient_id, expires_on, allowed, used] records."""
    by_specialty: dict[str, list] = defaultdict(list)
    family_doctors = [p[0] for p in PRACTITIONERS if p[2] == "Family Medicine"]
    for patient_id in rng.sample(patients, PATIENTS * 2 // 5):
        issued, specialty = rng.randrange(-300, 0), rng.choice(SPECIALTIES_NEEDING_REFERRAL)
        referral_id, allowed, doctor = ids("RF", 300000), rng.choice([2, 3, 4, 6]), rng.choice(family_doctors)
        conn.execute("INSERT INTO referrals VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (referral_id, patient_id, specialty, doctor, day(issued), day(issued + 180), allowed, 0))
        by_specialty[specialty].append([referral_id, patient_id, day(issued + 180), allowed, 0])
    return by_specialty


def _working_hours(rng: random.Random, specialty: str) -> list[tuple[int, str, int]]:
    """(day offset, starts_at, minutes) of every slot one practitioner offers across the calendar."""
    family = specialty == "Family Medicine"
    weekdays = range(5) if family else sorted(rng.sample(range(5), 3))
    times = ["09:00", "09:30", "10:00", "10:30", "11:00", "13:30", "14:00", "14:30", "15:30"] if family else \
        ["09:00", "10:00", "11:00", "13:00", "14:00", "15:00"]
    return [(offset, f"{day(offset)}T{time}", 20 if family else 45)
            for offset in range(CALENDAR_START, CALENDAR_END + 1)
            if (TODAY + timedelta(days=offset)).weekday() in weekdays for time in times]


def _calendar(conn: sqlite3.Connection, rng: random.Random, ids: _Ids, patients: list[str],
              referrals: dict[str, list]) -> None:
    """Bookable slots for every practitioner, most past and about half of the near ones booked.

    A patient has at most one visit a day; a specialist slot is booked only by a patient whose referral for
    that specialty is valid on the day and has a visit left, which the booking then uses up.
    """
    busy: set[tuple[str, str]] = set()
    for practitioner_id, _, specialty, needs_referral, fee in PRACTITIONERS:
        for offset, starts, minutes in _working_hours(rng, specialty):
            slot_id = ids("SL", 800000)
            patient = referral = None
            if rng.random() < (0.8 if offset < 0 else max(0.08, 0.6 - offset / 60)):
                if needs_referral:
                    usable = [r for r in referrals[specialty] if r[4] < r[3] and r[2] >= starts[:10]]
                    referral = rng.choice(usable) if usable else None
                    patient = referral[1] if referral else None
                else:
                    patient = rng.choice(patients)
            if patient is not None and (patient, starts[:10]) in busy:
                patient = referral = None  # a patient has one visit a day: the slot stays open
            conn.execute("INSERT INTO slots VALUES (?, ?, ?, ?, ?)",
                         (slot_id, practitioner_id, starts, minutes, "open" if patient is None else "booked"))
            if patient is None:
                continue
            busy.add((patient, starts[:10]))
            if referral:
                referral[4] += 1
                conn.execute("UPDATE referrals SET visits_used = ? WHERE referral_id = ?", (referral[4], referral[0]))
            status = "booked" if offset >= 0 else rng.choices(["completed", "no_show"], weights=[15, 1])[0]
            appointment_id = ids("AP", 200000)
            conn.execute("INSERT INTO appointments VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (appointment_id, patient, practitioner_id, slot_id, starts, referral[0] if referral else None,
                          rng.choice(PROCEDURES)[0] if specialty == IMAGING else None, status,
                          day(min(offset, 0) - rng.randrange(1, 40)), None))
            if status == "no_show":
                _fee(conn, rng, ids, patient, appointment_id, "no_show", fee, offset)


def _history(conn: sqlite3.Connection, rng: random.Random, ids: _Ids, patients: list[str]) -> None:
    """Visits older than the slot calendar: completed, missed or cancelled late (with their fees)."""
    unreferred = [p for p in PRACTITIONERS if not p[3]]
    for patient_id in patients:
        for _ in range(rng.choices([0, 1, 2, 3], weights=[2, 4, 3, 1])[0]):
            practitioner_id, _, _, _, fee = rng.choice(unreferred)
            offset = -rng.randrange(15, 420)
            status = rng.choices(["completed", "no_show", "cancelled"], weights=[12, 2, 2])[0]
            appointment_id = ids("AP", 200000)
            conn.execute("INSERT INTO appointments VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (appointment_id, patient_id, practitioner_id, None, f"{day(offset)}T10:00", None, None,
                          status, day(offset - 20), day(offset - 1) if status == "cancelled" else None))
            if status != "completed":
                kind = "no_show" if status == "no_show" else "late_cancellation"
                _fee(conn, rng, ids, patient_id, appointment_id, kind, fee, offset)


def _fee(conn: sqlite3.Connection, rng: random.Random, ids: _Ids, patient_id: str, appointment_id: str,
         kind: str, cents: int, offset: int) -> None:
    status = rng.choices(["paid", "unpaid", "waived"], weights=[5, 4, 1])[0]
    conn.execute("INSERT INTO fees VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                 (ids("FE", 500000), patient_id, appointment_id, kind, cents, status, day(offset),
                  day(offset + rng.randrange(2, 12)) if status == "waived" else None))


def _prescriptions(conn: sqlite3.Connection, rng: random.Random, ids: _Ids, patients: list[str]) -> None:
    prescribers = [p[0] for p in PRACTITIONERS if p[2] in ("Family Medicine", "Cardiology", "Endocrinology")]
    pharmacy = dict(conn.execute("SELECT patient_id, pharmacy FROM patients").fetchall())
    for patient_id in rng.sample(patients, PATIENTS * 3 // 5):
        for medication, controlled in rng.sample(MEDICINES, rng.choices([1, 2, 3], weights=[5, 3, 2])[0]):
            rx_id, supply = ids("RX", 400000), rng.choice([30, 30, 90])
            last = -rng.randrange(0, supply + 20)
            conn.execute("INSERT INTO prescriptions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (rx_id, patient_id, rng.choice(prescribers), medication, controlled, supply,
                          rng.randrange(0, 6), day(last), "discontinued" if rng.random() < 0.08 else "active"))
            for fill in (last - supply, last):
                conn.execute("INSERT INTO fills VALUES (?, ?, ?, ?)",
                             (ids("FL", 600000), rx_id, day(fill), pharmacy[patient_id]))


def _coverage_and_requests(conn: sqlite3.Connection, rng: random.Random, ids: _Ids, patients: list[str]) -> None:
    """Past imaging pre-authorisations and front-desk requests."""
    insured = [r[0] for r in conn.execute("SELECT patient_id FROM patients WHERE member_number IS NOT NULL")]
    for patient_id in rng.sample(insured, len(insured) // 7):
        submitted = -rng.randrange(1, 200)
        status = rng.choices(["approved", "denied", "pending"], weights=[6, 2, 1])[0] if submitted < -10 else "pending"
        conn.execute("INSERT INTO preauthorisations VALUES (?, ?, ?, ?, ?, ?)",
                     (ids("PA", 700000), patient_id, rng.choice(PROCEDURES[3:])[0], status, day(submitted),
                      None if status == "pending" else day(submitted + rng.randrange(2, 10))))
    for patient_id in rng.sample(patients, PATIENTS // 12):
        category = rng.choice(["scheduling", "billing", "records"])
        conn.execute("INSERT INTO requests VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (ids("RQ", 900000), patient_id, category, rng.choice(["open", "closed", "closed"]), None, None,
                      f"patient asked about {category}", day(-rng.randrange(1, 120))))
