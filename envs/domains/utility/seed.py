"""Seeded rows for the utility template: 650 households in the Willamette valley, their meters and bills.

Every value is drawn from the Random the SDK passes in, so one seed always yields one database. Bills run
monthly from December 2025 to May 2026; meters are read on the 3rd of each month with cumulative registers.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass
from datetime import date, timedelta

from envs.sdk import days_after

TODAY = date(2026, 5, 12)
HOUSEHOLDS = 650
BILL_MONTHS = ["2025-12", "2026-01", "2026-02", "2026-03", "2026-04", "2026-05"]
READ_MONTHS = ["2025-12", "2026-01", "2026-02", "2026-03", "2026-04", "2026-05"]

# code, utility, name, unit, unit rate (mills), daily charge (cents), open, needs smart meter, needs CARE
TARIFFS = [
    ("E-STD", "electric", "Residential Standard", "kWh", 184, 45, 1, 0, 0),
    ("E-TOU", "electric", "Time-of-Use Saver", "kWh", 152, 52, 1, 1, 0),
    ("E-GREEN", "electric", "Green Choice 100", "kWh", 205, 45, 1, 0, 0),
    ("E-CARE", "electric", "CARE Electric Assist", "kWh", 121, 20, 1, 0, 1),
    ("E-FLAT15", "electric", "Flat Rate 2015", "kWh", 168, 40, 0, 0, 0),
    ("W-STD", "water", "Residential Water", "kgal", 6850, 38, 1, 0, 0),
    ("W-CARE", "water", "CARE Water Assist", "kgal", 4790, 19, 1, 0, 1),
    ("W-TIER09", "water", "Tiered Water 2009", "kgal", 6200, 30, 0, 0, 0),
]
TOWNS = [("Corvallis", "97330"), ("Albany", "97321"), ("Eugene", "97401"), ("Salem", "97301"),
         ("Springfield", "97477"), ("Lebanon", "97355")]
STREETS = ["Oak St", "Maple Ave", "Riverside Dr", "Cedar Ln", "Willamette Blvd", "Hawthorne St", "Filbert Ct",
           "Juniper Way", "Sunset Ave", "Alder St", "Madrona Pl", "Skyline Rd", "Kings Blvd", "Circle Blvd"]
GIVEN = ["Aisha", "Brandon", "Carmen", "Darius", "Eleanor", "Felipe", "Grace", "Hiroshi", "Imani", "Jonah",
         "Keiko", "Liam", "Marisol", "Nathan", "Olga", "Pedro", "Rachel", "Sven", "Talia", "Victor", "Wendy",
         "Xavier", "Yusuf", "Zara"]
FAMILY = ["Alvarez", "Bergstrom", "Castillo", "Delgado", "Eriksen", "Fontaine", "Gallagher", "Harada", "Iverson",
          "Jablonski", "Kowalski", "Lindqvist", "McAllister", "Nakamura", "Okonkwo", "Petrov", "Quintero",
          "Ramirez", "Sorensen", "Thibodeaux", "Underwood", "Vasquez", "Whitaker", "Yamamoto"]


def day(offset: int) -> str:
    """ISO date `offset` days from TODAY (negative: in the past)."""
    return (TODAY + timedelta(days=offset)).isoformat()


@dataclass
class Counters:
    """Running serial numbers, so every key is unique across the whole database."""

    premise: int = 0
    meter: int = 0
    reading: int = 0
    bill: int = 0
    adjustment: int = 0
    dispute: int = 0
    plan: int = 0
    order: int = 0
    case: int = 0

    def next(self, name: str) -> int:
        value = getattr(self, name) + 1
        setattr(self, name, value)
        return value


def _electric_tariff(rng: random.Random, care: bool, smart: bool) -> str:
    if care and rng.random() < 0.7:
        return "E-CARE"
    options = ["E-STD", "E-STD", "E-GREEN", "E-FLAT15"] + (["E-TOU", "E-TOU"] if smart else [])
    return rng.choice(options)


def _water_tariff(rng: random.Random, care: bool) -> str:
    if care and rng.random() < 0.7:
        return "W-CARE"
    return rng.choice(["W-STD", "W-STD", "W-STD", "W-TIER09"])


def _meter(conn: sqlite3.Connection, rng: random.Random, n: Counters, premise_id: str, utility: str,
           care: bool) -> None:
    """One meter with its monthly register reads and, if cut off for non-payment, its completed order."""
    meter_id = f"MT-{300000 + n.next('meter')}"
    smart = rng.random() < (0.55 if utility == "electric" else 0.3)
    tariff = _electric_tariff(rng, care, smart) if utility == "electric" else _water_tariff(rng, care)
    cut_off = rng.random() < 0.05
    disconnected_on = day(-rng.randrange(5, 40)) if cut_off else None
    changed = day(-rng.randrange(20, 900)) if rng.random() < 0.6 else None
    conn.execute("INSERT INTO meters VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 (meter_id, premise_id, utility, f"{utility[0].upper()}{rng.randrange(10**7, 10**8)}",
                  "smart" if smart else "standard", tariff, "disconnected" if cut_off else "connected",
                  disconnected_on, day(-rng.randrange(400, 4000)), changed, rng.randrange(0, 100)))
    register = rng.randrange(1000, 60000) if utility == "electric" else rng.randrange(50000, 900000)
    for month in READ_MONTHS:
        read_on = f"{month}-03"
        if disconnected_on and read_on > disconnected_on:
            break
        register += rng.randrange(250, 1400) if utility == "electric" else rng.randrange(1800, 9500)
        kind = "estimated" if rng.random() < 0.15 else "actual"
        conn.execute("INSERT INTO readings VALUES (?, ?, ?, ?, ?)",
                     (f"RD-{500000 + n.next('reading')}", meter_id, read_on, register, kind))
    if disconnected_on is not None:
        conn.execute("INSERT INTO service_orders VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (f"SO-{80000 + n.next('order')}", meter_id, "disconnect", "completed", disconnected_on,
                      "non-payment disconnection after final notice", days_after(disconnected_on, -10)))


def _bills(conn: sqlite3.Connection, rng: random.Random, n: Counters, account_id: str) -> list[str]:
    """Six monthly bills; the newest is always open, and some households fall one to three bills behind."""
    base = rng.randrange(6000, 32000) if rng.random() < 0.85 else rng.randrange(32000, 52000)
    behind = rng.choices([0, 1, 2, 3], weights=[70, 15, 10, 5])[0]
    bill_ids = []
    for index, month in enumerate(BILL_MONTHS):
        bill_id = f"BL-{600000 + n.next('bill')}"
        issued = f"{month}-08"
        due = days_after(issued, 21)
        unpaid = index >= len(BILL_MONTHS) - 1 - behind
        winter = 1.25 if month[5:] in ("12", "01", "02") else 1.0
        conn.execute("INSERT INTO bills VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (bill_id, account_id, days_after(issued, -36), days_after(issued, -6), issued, due,
                      int(base * winter) + rng.randrange(0, 900), int(rng.random() < 0.12),
                      "unpaid" if unpaid else "paid", None if unpaid else days_after(due, -rng.randrange(0, 15))))
        bill_ids.append(bill_id)
    return bill_ids


def _history(conn: sqlite3.Connection, rng: random.Random, n: Counters, account_id: str,
             bill_ids: list[str]) -> None:
    """Past adjustments, disputes, payment plans and cases, at realistic low rates."""
    if rng.random() < 0.08:
        conn.execute("INSERT INTO adjustments VALUES (?, ?, ?, ?, ?)",
                     (f"AD-{70000 + n.next('adjustment')}", rng.choice(bill_ids[:-1]),
                      rng.choice([500, 1200, 2000, 3500]), "estimated read corrected", day(-rng.randrange(5, 150))))
    if rng.random() < 0.05:
        conn.execute("INSERT INTO disputes VALUES (?, ?, ?, ?, ?, ?)",
                     (f"DS-{40000 + n.next('dispute')}", rng.choice(bill_ids[:-2]),
                      rng.choice(["high_bill", "estimated_read", "wrong_meter"]), rng.choice(["upheld", "rejected"]),
                      "customer questioned usage", day(-rng.randrange(60, 150))))
    if rng.random() < 0.12:
        status = rng.choice(["active", "completed", "defaulted"])
        created = day(-rng.randrange(20, 120) if status == "active" else -rng.randrange(60, 700))
        months = rng.choice([3, 4, 6])
        total = rng.randrange(15000, 90000)
        conn.execute("INSERT INTO payment_plans VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (f"PP-{20000 + n.next('plan')}", account_id, total, months, -(-total // months),
                      days_after(created, 14), status, created))
    if rng.random() < 0.1:
        conn.execute("INSERT INTO cases VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (f"CS-{90000 + n.next('case')}", account_id, rng.choice(["billing_enquiry", "meter_issue"]),
                      rng.choice(["open", "closed", "closed"]), None, None, "customer called about their bill",
                      day(-rng.randrange(3, 300))))


def populate(conn: sqlite3.Connection, rng: random.Random) -> None:
    conn.executemany("INSERT INTO tariffs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", TARIFFS)
    n = Counters()
    for h in range(HOUSEHOLDS):
        account_id = f"AC-{200001 + h}"
        given, family = rng.choice(GIVEN), rng.choice(FAMILY)
        town, zip_code = rng.choice(TOWNS)
        care = rng.random() < 0.15
        conn.execute("INSERT INTO accounts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (account_id, f"{given} {family}", f"+1-541-555-{1000 + h:04d}",
                      f"{given}.{family}{h}@example.net".lower(), f"{rng.randrange(10000):04d}", zip_code,
                      day(-rng.randrange(90, 5000)), "CARE" if care else "none", int(rng.random() < 0.06),
                      int(rng.random() < 0.35), rng.randrange(100, 1000)))
        for _ in range(2 if rng.random() < 0.1 else 1):
            premise_id = f"PR-{100000 + n.next('premise')}"
            dwelling = rng.choices(["single_family", "townhouse", "apartment"], weights=[5, 2, 3])[0]
            conn.execute("INSERT INTO premises VALUES (?, ?, ?, ?, ?, ?)",
                         (premise_id, account_id, f"{rng.randrange(100, 9900)} {rng.choice(STREETS)}", town,
                          zip_code, dwelling))
            _meter(conn, rng, n, premise_id, "electric", care)
            if dwelling != "apartment" or rng.random() < 0.3:
                _meter(conn, rng, n, premise_id, "water", care)
        _history(conn, rng, n, account_id, _bills(conn, rng, n, account_id))
