"""Seeded, realistic rows for the telecom template: 900 customers with their lines, devices and invoices.

Everything is drawn from the Random passed in, so the same seed always yields the same database.
"""

from __future__ import annotations

import random
import sqlite3
from datetime import date, timedelta

TODAY = date(2026, 3, 14)
CUSTOMERS = 900

PLANS = [  # code, name, monthly fee (cents), data (GB), active
    ("BASIC5", "Basic 5GB", 2000, 5, 1),
    ("LEGACY10", "Legacy 10GB", 2500, 10, 0),
    ("PLUS20", "Plus 20GB", 3500, 20, 1),
    ("MAX50", "Max 50GB", 5000, 50, 1),
    ("UNLTD", "Unlimited", 6500, 999, 1),
]
ADDONS = [
    ("INTL_CALLS", "International Calling", 1000),
    ("EXTRA_DATA5", "Extra 5GB Data", 800),
    ("HOTSPOT", "Mobile Hotspot", 500),
    ("STREAM_PASS", "Streaming Pass", 700),
    ("VOICEMAIL_PLUS", "Visual Voicemail", 300),
]
FIRST = ["Ava", "Ben", "Chloe", "Diego", "Elena", "Farah", "George", "Hana", "Ivan", "Julia", "Kenji", "Lena",
         "Mateo", "Nora", "Omar", "Priya", "Quinn", "Rosa", "Samir", "Tara", "Umar", "Vera", "Wei", "Yara", "Zoe"]
LAST = ["Adams", "Brooks", "Chen", "Dubois", "Evans", "Fischer", "Garcia", "Hughes", "Ibrahim", "Jensen", "Kim",
        "Lopez", "Moreau", "Novak", "Okafor", "Patel", "Rossi", "Silva", "Tanaka", "Usman", "Varga", "Wong"]
MODELS = [("Pixel 9", 79900), ("iPhone 16", 89900), ("Galaxy S25", 84900), ("Moto G", 24900),
          ("Nokia X30", 39900), ("iPhone 15", 69900), ("Galaxy A55", 44900)]


def day(offset: int) -> str:
    """The ISO date `offset` days after today (negative: before)."""
    return (TODAY + timedelta(days=offset)).isoformat()


def add_months(iso: str, months: int) -> str:
    d = date.fromisoformat(iso)
    month = d.month - 1 + months
    return date(d.year + month // 12, month % 12 + 1, min(d.day, 28)).isoformat()


def populate(conn: sqlite3.Connection, rng: random.Random) -> None:
    conn.executemany("INSERT INTO plans VALUES (?, ?, ?, ?, ?)", PLANS)
    conn.executemany("INSERT INTO addons VALUES (?, ?, ?)", ADDONS)
    line_no = device_no = invoice_no = credit_no = ticket_no = change_no = 0
    for c in range(CUSTOMERS):
        customer_id = f"C-{10001 + c}"
        first, last = rng.choice(FIRST), rng.choice(LAST)
        tier = rng.choices(["standard", "gold", "platinum"], weights=[6, 3, 1])[0]
        first_msisdn = f"+1-202-555-{1000 + line_no:04d}"
        dob = date(1950, 1, 1) + timedelta(days=rng.randrange(0, 54 * 365))
        conn.execute(
            "INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (customer_id, f"{first} {last}", f"{first}.{last}.{c}@example.com".lower(), first_msisdn,
             dob.isoformat(), f"{rng.randrange(10000):04d}", tier, day(-rng.randrange(60, 3000)),
             rng.randrange(300, 851), round(rng.random(), 2)),
        )
        monthly = 0
        for _ in range(rng.choices([1, 2, 3], weights=[6, 3, 1])[0]):
            line_id = f"L-{20001 + line_no}"
            plan = rng.choices(PLANS, weights=[3, 2, 4, 3, 2])[0]
            monthly += plan[2]
            activated = day(-rng.randrange(30, 1100))
            changed = day(-rng.randrange(1, 700)) if rng.random() < 0.6 else None
            suspended = rng.random() < 0.05
            conn.execute(
                "INSERT INTO lines VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (line_id, customer_id, f"+1-202-555-{1000 + line_no:04d}", plan[0],
                 "suspended" if suspended else "active",
                 rng.choice(["non_payment", "lost_device"]) if suspended else None,
                 activated, add_months(activated, 24), changed, round(rng.uniform(0, plan[3] * 0.9), 1),
                 int(rng.random() < 0.2)),
            )
            if changed:
                change_no += 1
                old = rng.choice([p[0] for p in PLANS if p[0] != plan[0]])
                conn.execute("INSERT INTO plan_changes VALUES (?, ?, ?, ?, ?)",
                             (f"PC-{50000 + change_no}", line_id, old, plan[0], changed))
            for addon in rng.sample(ADDONS, rng.choices([0, 1, 2, 3], weights=[4, 3, 2, 1])[0]):
                conn.execute("INSERT INTO line_addons VALUES (?, ?, ?)",
                             (line_id, addon[0], day(-rng.randrange(1, 400))))
            model, price = rng.choice(MODELS)
            device_no += 1
            conn.execute(
                "INSERT INTO devices VALUES (?, ?, ?, ?, ?, ?, ?)",
                (f"D-{30000 + device_no}", line_id, model, f"35{rng.randrange(10**12, 10**13)}",
                 day(-rng.randrange(31, 900)), price, int(rng.random() < 0.4)),
            )
            line_no += 1
        for month in range(6):  # invoices issued on the 1st of Oct 2025 .. Mar 2026
            issued = add_months("2025-10-01", month)
            invoice_no += 1
            invoice_id = f"INV-{40000 + invoice_no}"
            latest = month == 5
            unpaid = latest or (month == 4 and rng.random() < 0.12)
            conn.execute(
                "INSERT INTO invoices VALUES (?, ?, ?, ?, ?, ?)",
                (invoice_id, customer_id, issued, issued[:8] + "21", monthly + rng.choice([0, 0, 299, 512, 1045]),
                 "unpaid" if unpaid else "paid"),
            )
            if rng.random() < 0.04:
                credit_no += 1
                conn.execute("INSERT INTO credits VALUES (?, ?, ?, ?, ?)",
                             (f"CR-{60000 + credit_no}", invoice_id, rng.choice([500, 1000, 1500]),
                              "service outage goodwill", issued[:8] + "15"))
        if rng.random() < 0.3:
            ticket_no += 1
            conn.execute(
                "INSERT INTO tickets VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (f"TK-{70000 + ticket_no}", customer_id, rng.choice(["billing", "network", "device"]),
                 rng.choice(["open", "closed", "closed"]), None, None, "customer reported an issue",
                 day(-rng.randrange(1, 300))),
            )
